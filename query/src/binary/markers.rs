//! The type-marker bytes of Cosmos binary JSON: the first byte of every value says what it
//! is and how its payload is framed. Multi-byte payloads, lengths and counts are little-endian.
//!
//! ```text
//! 00..20 the integer itself      20..40 system string (dictionary below)
//! 40..68 user string (external dictionary: not usable over the REST API)
//! 68..80 base64, GUID and packed strings
//! 80..C0 string whose byte length is marker & 0x3F   C0..C3 string with a 1/2/4-byte length
//! C3..C7 reference to a string earlier in the buffer  C7..D0 numbers
//! D0..E0 null, false, true, GUID, sized integers, binary blobs
//! E0..E8 arrays                  E8..F0 objects          F0..F4 uniform number arrays
//! ```

pub const LITERAL_INT_END: u8 = 0x20;
pub const SYSTEM_STRING: u8 = 0x20;
pub const SYSTEM_STRING_END: u8 = 0x40;
pub const USER_STRING: u8 = 0x40;
pub const USER_STRING_END: u8 = 0x68;

pub const BASE64_L1: u8 = 0x71;
pub const BASE64_L2: u8 = 0x72;
pub const BASE64_URL_L1: u8 = 0x73;
pub const BASE64_URL_L2: u8 = 0x74;
pub const GUID_STRING_LOWER: u8 = 0x75;
pub const GUID_STRING_UPPER: u8 = 0x76;
pub const GUID_STRING_QUOTED: u8 = 0x77;
pub const HEX_LOWER: u8 = 0x78;
pub const HEX_UPPER: u8 = 0x79;
pub const DATE_TIME: u8 = 0x7A;
pub const PACKED_4: u8 = 0x7B;
pub const PACKED_5: u8 = 0x7C;
pub const PACKED_6: u8 = 0x7D;
pub const PACKED_7_L1: u8 = 0x7E;
pub const PACKED_7_L2: u8 = 0x7F;

/// Strings of 0..=63 bytes carry their length in the marker (`0x80 | len`).
pub const SHORT_STRING: u8 = 0x80;
pub const SHORT_STRING_END: u8 = 0xC0;
pub const STRING_L1: u8 = 0xC0;
pub const STRING_L2: u8 = 0xC1;
pub const STRING_L4: u8 = 0xC2;
pub const REF_1: u8 = 0xC3;
pub const REF_2: u8 = 0xC4;
pub const REF_3: u8 = 0xC5;
pub const REF_4: u8 = 0xC6;

pub const NUMBER_UINT64: u8 = 0xC7;
pub const NUMBER_UINT8: u8 = 0xC8;
pub const NUMBER_INT16: u8 = 0xC9;
pub const NUMBER_INT32: u8 = 0xCA;
pub const NUMBER_INT64: u8 = 0xCB;
pub const NUMBER_DOUBLE: u8 = 0xCC;
pub const FLOAT32: u8 = 0xCD;
pub const FLOAT64: u8 = 0xCE;
pub const FLOAT16: u8 = 0xCF;

pub const NULL: u8 = 0xD0;
pub const FALSE: u8 = 0xD1;
pub const TRUE: u8 = 0xD2;
pub const GUID: u8 = 0xD3;
pub const UINT8: u8 = 0xD7;
pub const INT8: u8 = 0xD8;
pub const INT16: u8 = 0xD9;
pub const INT32: u8 = 0xDA;
pub const INT64: u8 = 0xDB;
pub const UINT32: u8 = 0xDC;
pub const BINARY_L1: u8 = 0xDD;
pub const BINARY_L2: u8 = 0xDE;
pub const BINARY_L4: u8 = 0xDF;

/// `ARRAY_0`, `ARRAY_1`, then byte length (L) or byte length and count (LC) in 1, 2 or 4 bytes.
pub const ARRAY_0: u8 = 0xE0;
pub const ARRAY_1: u8 = 0xE1;
pub const ARRAY_L1: u8 = 0xE2;
pub const ARRAY_LC1: u8 = 0xE5;
pub const ARRAY_LC2: u8 = 0xE6;
pub const ARRAY_LC4: u8 = 0xE7;
/// The same six framings for objects, whose members are a string name and a value.
pub const OBJECT_0: u8 = 0xE8;
pub const OBJECT_1: u8 = 0xE9;
pub const OBJECT_L1: u8 = 0xEA;
pub const OBJECT_LC1: u8 = 0xED;
pub const OBJECT_LC2: u8 = 0xEE;
pub const OBJECT_LC4: u8 = 0xEF;

/// Arrays of bare numbers sharing one item marker (1- or 2-byte count), and arrays of them.
pub const NUMBERS_C1: u8 = 0xF0;
pub const NUMBERS_C2: u8 = 0xF1;
pub const NUMBER_ARRAYS_C1: u8 = 0xF2;
pub const NUMBER_ARRAYS_C2: u8 = 0xF3;

/// The fixed dictionary of system strings, in wire order: marker `0x20 + i` is entry `i`.
pub const SYSTEM_STRINGS: [&str; 32] = [
    "$s",
    "$t",
    "$v",
    "_attachments",
    "_etag",
    "_rid",
    "_self",
    "_ts",
    "attachments/",
    "coordinates",
    "geometry",
    "GeometryCollection",
    "id",
    "url",
    "Value",
    "label",
    "LineString",
    "link",
    "MultiLineString",
    "MultiPoint",
    "MultiPolygon",
    "name",
    "Name",
    "Type",
    "Point",
    "Polygon",
    "properties",
    "type",
    "value",
    "Feature",
    "FeatureCollection",
    "_id",
];

/// The marker of `s` when it is a system string.
pub fn system_string_marker(s: &str) -> Option<u8> {
    // The dictionary is short and most strings miss on the length or first byte.
    SYSTEM_STRINGS
        .iter()
        .position(|e| e.len() == s.len() && *e == s)
        .map(|i| SYSTEM_STRING + i as u8)
}

/// Alphabets of the 4-bit table-compressed strings (low nibble first).
pub const LOWER_HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";
pub const UPPER_HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";
pub const DATE_TIME_DIGITS: &[u8; 16] = b" 0123456789:-.TZ";
