//! Binary to text: one walk over the buffer that writes compact JSON text as it goes, so a
//! binary request body costs the server one extra pass, not a second document tree.
//!
//! Every read is bounds-checked; lengths are checked against what is left of the buffer before
//! anything is allocated, nesting is bounded, and what reference strings (which may point many
//! times at one long string) expand to is charged against the caller's output limit.

use super::markers::*;
use super::BinaryError;
use base64::Engine as _;
use std::borrow::Cow;

/// Deepest nesting of arrays and objects accepted (the text parser's own limit).
pub const MAX_DEPTH: usize = 128;

type Result<T> = std::result::Result<T, BinaryError>;

/// A number as the format carries it.
enum Num {
    Int(i64),
    Uint(u64),
    Float(f64),
}

pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    out: Vec<u8>,
    limit: usize,
}

impl<'a> Reader<'a> {
    /// A reader of the value after the preamble, writing at most `limit` bytes of text.
    pub(super) fn new(buf: &'a [u8], limit: usize) -> Self {
        Self {
            buf,
            pos: 1,
            out: Vec::with_capacity(buf.len().saturating_mul(5) / 4 + 16),
            limit,
        }
    }

    /// Transcodes the one value of the buffer; bytes after it are an error.
    pub(super) fn into_text(mut self) -> Result<Vec<u8>> {
        self.value(0)?;
        if self.pos != self.buf.len() {
            return Err(self.error(
                self.pos,
                format!(
                    "{} bytes follow the end of the document",
                    self.buf.len() - self.pos
                ),
            ));
        }
        Ok(self.out)
    }

    fn error(&self, at: usize, what: impl Into<String>) -> BinaryError {
        BinaryError::Malformed {
            offset: at,
            what: what.into(),
        }
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.error(self.pos, "the document ends in the middle of a value"))?;
        self.pos += 1;
        Ok(b)
    }

    fn bytes(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(self.error(
                self.pos,
                format!(
                    "a length of {len} bytes runs past the end of the document ({} bytes left)",
                    self.buf.len() - self.pos
                ),
            ));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    /// A little-endian unsigned field of 1, 2, 3 or 4 bytes.
    fn uint(&mut self, width: usize) -> Result<usize> {
        let b = self.bytes(width)?;
        Ok(b.iter()
            .rev()
            .fold(0usize, |acc, &x| (acc << 8) | usize::from(x)))
    }

    fn write(&mut self, text: &[u8]) -> Result<()> {
        if self.out.len() + text.len() > self.limit {
            return Err(BinaryError::TooLarge { limit: self.limit });
        }
        self.out.extend_from_slice(text);
        Ok(())
    }

    fn write_str(&mut self, s: &str) -> Result<()> {
        // Escaping adds at most 6 bytes per input byte; check cheaply first, exactly after.
        if self.out.len() + s.len() > self.limit {
            return Err(BinaryError::TooLarge { limit: self.limit });
        }
        let _ = serde_json::to_writer(&mut self.out, s);
        if self.out.len() > self.limit {
            return Err(BinaryError::TooLarge { limit: self.limit });
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<()> {
        let at = self.pos;
        let marker = self.byte()?;
        match marker {
            ARRAY_0..=ARRAY_LC4 => self.container(marker - ARRAY_0, false, at, depth),
            OBJECT_0..=OBJECT_LC4 => self.container(marker - OBJECT_0, true, at, depth),
            NULL => self.write(b"null"),
            FALSE => self.write(b"false"),
            TRUE => self.write(b"true"),
            NUMBERS_C1 | NUMBERS_C2 => {
                let width = if marker == NUMBERS_C1 { 1 } else { 2 };
                let item = self.byte()?;
                let count = self.uint(width)?;
                self.number_array(item, count, at)
            }
            NUMBER_ARRAYS_C1 | NUMBER_ARRAYS_C2 => self.number_arrays(marker, at),
            BINARY_L1 | BINARY_L2 | BINARY_L4 => {
                let width = [1, 2, 4][usize::from(marker - BINARY_L1)];
                let len = self.uint(width)?;
                let blob = self.bytes(len)?;
                let text = base64::engine::general_purpose::STANDARD.encode(blob);
                self.write_str(&text)
            }
            GUID => {
                let g = self.fixed::<16>()?;
                let text = guid_value(&g);
                self.write_str(&text)
            }
            _ => {
                if let Some(n) = self.number(marker)? {
                    return self.write_number(n, at);
                }
                match self.string(marker, at)? {
                    Some(s) => self.write_str(&s),
                    None => Err(self.error(at, format!("0x{marker:02X} is not a type marker"))),
                }
            }
        }
    }

    /// An array (`object` false) or object whose marker is `kind` past its family's first:
    /// 0 empty, 1 one element, 2..=4 byte length in 1/2/4 bytes, 5..=7 byte length and count.
    fn container(&mut self, kind: u8, object: bool, at: usize, depth: usize) -> Result<()> {
        if depth >= MAX_DEPTH {
            return Err(self.error(
                at,
                format!("arrays and objects nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        let (open, close) = if object { (b"{", b"}") } else { (b"[", b"]") };
        self.write(open)?;
        match kind {
            0 => {}
            1 => self.element(object, depth)?,
            _ => {
                let width = [1, 2, 4][usize::from((kind - 2) % 3)];
                let len = self.uint(width)?;
                let count = if kind >= 5 {
                    Some(self.uint(width)?)
                } else {
                    None
                };
                let end = self.pos.checked_add(len).filter(|&e| e <= self.buf.len());
                let Some(end) = end else {
                    return Err(self.error(
                        at,
                        format!("a container of {len} bytes runs past the end of the document"),
                    ));
                };
                let mut n = 0usize;
                while self.pos < end {
                    if n > 0 {
                        self.write(b",")?;
                    }
                    self.element(object, depth)?;
                    n += 1;
                }
                if self.pos != end {
                    return Err(self.error(at, "an element runs past the end of its container"));
                }
                if let Some(count) = count.filter(|&c| c != n) {
                    return Err(self.error(
                        at,
                        format!("a container declares {count} elements but holds {n}"),
                    ));
                }
            }
        }
        self.write(close)
    }

    /// One array element, or one object member (a string name, then a value).
    fn element(&mut self, object: bool, depth: usize) -> Result<()> {
        if object {
            let at = self.pos;
            let marker = self.byte()?;
            let Some(name) = self.string(marker, at)? else {
                return Err(self.error(at, "a property name is not a string"));
            };
            self.write_str(&name)?;
            self.write(b":")?;
        }
        self.value(depth + 1)
    }

    fn number(&mut self, marker: u8) -> Result<Option<Num>> {
        Ok(Some(match marker {
            0..LITERAL_INT_END => Num::Int(i64::from(marker)),
            NUMBER_UINT8 | UINT8 => Num::Int(i64::from(self.byte()?)),
            INT8 => Num::Int(i64::from(i8::from_le_bytes(self.fixed()?))),
            NUMBER_INT16 | INT16 => Num::Int(i64::from(i16::from_le_bytes(self.fixed()?))),
            NUMBER_INT32 | INT32 => Num::Int(i64::from(i32::from_le_bytes(self.fixed()?))),
            UINT32 => Num::Int(i64::from(u32::from_le_bytes(self.fixed()?))),
            NUMBER_INT64 | INT64 => Num::Int(i64::from_le_bytes(self.fixed()?)),
            NUMBER_UINT64 => Num::Uint(u64::from_le_bytes(self.fixed()?)),
            NUMBER_DOUBLE | FLOAT64 => Num::Float(f64::from_le_bytes(self.fixed()?)),
            FLOAT32 => Num::Float(f64::from(f32::from_le_bytes(self.fixed()?))),
            FLOAT16 => Num::Float(half_to_f64(u16::from_le_bytes(self.fixed()?))),
            _ => return Ok(None),
        }))
    }

    fn write_number(&mut self, n: Num, at: usize) -> Result<()> {
        let mut text = Vec::with_capacity(24);
        match n {
            Num::Int(i) => {
                let _ = serde_json::to_writer(&mut text, &i);
            }
            Num::Uint(u) => {
                let _ = serde_json::to_writer(&mut text, &u);
            }
            Num::Float(f) if f.is_finite() => {
                let _ = serde_json::to_writer(&mut text, &f);
            }
            Num::Float(f) => {
                return Err(self.error(at, format!("the number {f} has no JSON form")));
            }
        }
        self.write(&text)
    }

    /// `count` bare numbers sharing the item marker `item` (uniform number arrays).
    fn number_array(&mut self, item: u8, count: usize, at: usize) -> Result<()> {
        if !matches!(
            item,
            INT8 | UINT8 | INT16 | INT32 | INT64 | UINT32 | FLOAT16 | FLOAT32 | FLOAT64
        ) {
            return Err(self.error(
                at,
                format!("0x{item:02X} is not an item type of a uniform number array"),
            ));
        }
        self.write(b"[")?;
        for i in 0..count {
            if i > 0 {
                self.write(b",")?;
            }
            match self.number(item)? {
                Some(n) => self.write_number(n, at)?,
                None => return Err(self.error(at, "a uniform number array item is not a number")),
            }
        }
        self.write(b"]")
    }

    fn number_arrays(&mut self, marker: u8, at: usize) -> Result<()> {
        let (width, inner_marker) = if marker == NUMBER_ARRAYS_C1 {
            (1, NUMBERS_C1)
        } else {
            (2, NUMBERS_C2)
        };
        if self.byte()? != inner_marker {
            return Err(self.error(
                at,
                "an array of number arrays names the wrong inner array type",
            ));
        }
        let item = self.byte()?;
        let inner = self.uint(width)?;
        let outer = self.uint(width)?;
        self.write(b"[")?;
        for i in 0..outer {
            if i > 0 {
                self.write(b",")?;
            }
            self.number_array(item, inner, at)?;
        }
        self.write(b"]")
    }

    fn utf8(&self, bytes: &'a [u8], at: usize) -> Result<&'a str> {
        std::str::from_utf8(bytes).map_err(|e| {
            self.error(
                at,
                format!(
                    "a string is not valid UTF-8 (bad byte at {} of the string)",
                    e.valid_up_to()
                ),
            )
        })
    }

    /// The string a string marker stands for, or `None` when `marker` is not a string form.
    fn string(&mut self, marker: u8, at: usize) -> Result<Option<Cow<'a, str>>> {
        let s = match marker {
            SYSTEM_STRING..SYSTEM_STRING_END => {
                Cow::Borrowed(SYSTEM_STRINGS[usize::from(marker - SYSTEM_STRING)])
            }
            USER_STRING..USER_STRING_END => {
                return Err(self.error(
                    at,
                    "user-dictionary strings (0x40-0x67) cannot be used over the REST API: send the string itself",
                ))
            }
            SHORT_STRING..SHORT_STRING_END => {
                let b = self.bytes(usize::from(marker - SHORT_STRING))?;
                Cow::Borrowed(self.utf8(b, at)?)
            }
            STRING_L1 | STRING_L2 | STRING_L4 => {
                let len = self.uint([1, 2, 4][usize::from(marker - STRING_L1)])?;
                let b = self.bytes(len)?;
                Cow::Borrowed(self.utf8(b, at)?)
            }
            REF_1..=REF_4 => {
                let target = self.uint(usize::from(marker - REF_1) + 1)?;
                Cow::Owned(self.reference(target, at)?)
            }
            GUID_STRING_LOWER | GUID_STRING_UPPER | GUID_STRING_QUOTED => {
                let g = self.fixed::<16>()?;
                Cow::Owned(guid_string(&g, marker))
            }
            BASE64_L1 | BASE64_L2 | BASE64_URL_L1 | BASE64_URL_L2 => {
                Cow::Owned(self.base64_string(marker, at)?)
            }
            HEX_LOWER | HEX_UPPER | DATE_TIME => {
                let digits = match marker {
                    HEX_LOWER => LOWER_HEX_DIGITS,
                    HEX_UPPER => UPPER_HEX_DIGITS,
                    _ => DATE_TIME_DIGITS,
                };
                let len = usize::from(self.byte()?);
                Cow::Owned(self.packed(4, len, Some(digits), 0, at)?)
            }
            PACKED_4 | PACKED_5 | PACKED_6 => {
                let bits = u32::from(marker - PACKED_4) + 4;
                let len = usize::from(self.byte()?);
                let base = self.byte()?;
                Cow::Owned(self.packed(bits, len, None, base, at)?)
            }
            PACKED_7_L1 | PACKED_7_L2 => {
                let len = self.uint(usize::from(marker - PACKED_7_L1) + 1)?;
                Cow::Owned(self.packed(7, len, None, 0, at)?)
            }
            _ => return Ok(None),
        };
        Ok(Some(s))
    }

    /// A reference string: the string at absolute offset `target` (the preamble is offset 0),
    /// which must itself be a string and not another reference, so chains cannot form.
    fn reference(&self, target: usize, at: usize) -> Result<String> {
        let marker = self.buf.get(target).copied();
        let ok = marker.is_some_and(|m| {
            (SYSTEM_STRING..NUMBER_UINT64).contains(&m) && !(REF_1..=REF_4).contains(&m)
        });
        if !ok || target == 0 {
            return Err(self.error(
                at,
                format!("a reference string points at offset {target}, where no string starts"),
            ));
        }
        let mut sub = Reader {
            buf: self.buf,
            pos: target + 1,
            out: Vec::new(),
            limit: 0,
        };
        let s = sub
            .string(marker.unwrap_or_default(), target)?
            .ok_or_else(|| self.error(at, "a reference string points at something else"))?;
        Ok(s.into_owned())
    }

    /// Base64 text kept as its raw bytes: a group count (1 or 2 bytes), a padding byte, then
    /// the bytes. Padding 0..=2 is the number of `=`; more than 2 is `!n`, with `=` omitted.
    fn base64_string(&mut self, marker: u8, at: usize) -> Result<String> {
        let wide = matches!(marker, BASE64_L2 | BASE64_URL_L2);
        let groups = self.uint(if wide { 2 } else { 1 })?;
        let padding = self.byte()?;
        let (pad, omitted) = if padding > 2 {
            (usize::from(!padding), true)
        } else {
            (usize::from(padding), false)
        };
        let chars = groups * 4;
        if pad > 2 || pad > chars {
            return Err(self.error(at, "a base64 string has impossible padding"));
        }
        let raw = self.bytes((chars - pad) * 3 / 4)?;
        let engine = if matches!(marker, BASE64_URL_L1 | BASE64_URL_L2) {
            &base64::engine::general_purpose::URL_SAFE
        } else {
            &base64::engine::general_purpose::STANDARD
        };
        let mut text = engine.encode(raw);
        text.truncate(if omitted { chars - pad } else { chars });
        Ok(text)
    }

    /// `len` characters of `bits` bits each, least significant bit first; each value indexes
    /// `table`, or is added to `base`. Only ASCII results are valid.
    fn packed(
        &mut self,
        bits: u32,
        len: usize,
        table: Option<&[u8; 16]>,
        base: u8,
        at: usize,
    ) -> Result<String> {
        let data = self.bytes((len * bits as usize).div_ceil(8))?;
        let mask = (1u32 << bits) - 1;
        let mut s = String::with_capacity(len);
        for i in 0..len {
            let bit = i * bits as usize;
            let lo = u32::from(data[bit / 8]);
            let hi = data.get(bit / 8 + 1).map_or(0, |&b| u32::from(b));
            let v = ((lo | (hi << 8)) >> (bit % 8)) & mask;
            let ch = match table {
                Some(t) => t[v as usize],
                None => (v as u8).wrapping_add(base),
            };
            if !ch.is_ascii() {
                return Err(self.error(at, "a packed string decodes to a non-ASCII byte"));
            }
            s.push(char::from(ch));
        }
        Ok(s)
    }
}

/// A GUID string kept as 16 bytes of hex digit pairs (low nibble first) in text order.
fn guid_string(g: &[u8; 16], marker: u8) -> String {
    let digits = if marker == GUID_STRING_UPPER {
        UPPER_HEX_DIGITS
    } else {
        LOWER_HEX_DIGITS
    };
    let mut s = String::with_capacity(38);
    if marker == GUID_STRING_QUOTED {
        s.push('"');
    }
    for (i, b) in g.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(digits[usize::from(b & 0x0F)]));
        s.push(char::from(digits[usize::from(b >> 4)]));
    }
    if marker == GUID_STRING_QUOTED {
        s.push('"');
    }
    s
}

/// A GUID value in .NET's layout: the first three groups little-endian, the rest in order.
fn guid_value(b: &[u8; 16]) -> String {
    let order = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
    let mut s = String::with_capacity(36);
    for (i, &j) in order.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(LOWER_HEX_DIGITS[usize::from(b[j] >> 4)]));
        s.push(char::from(LOWER_HEX_DIGITS[usize::from(b[j] & 0x0F)]));
    }
    s
}

/// IEEE 754 half precision to double.
fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1F);
    let frac = f64::from(h & 0x3FF);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        0x1F if frac == 0.0 => sign * f64::INFINITY,
        0x1F => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}
