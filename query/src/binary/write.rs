//! Value to binary, in the compact forms every reader of the format accepts: literal and
//! narrowest fixed-width integers, doubles, system strings for the dictionary's names (`id`,
//! `_rid`, `_etag`, `_ts`, ...), length-in-marker strings, and length-and-count containers.

use super::markers::*;
use serde_json::{Number, Value};

pub(super) fn value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => number(n, out),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            let start = open(out);
            for item in items {
                value(item, out);
            }
            close(out, start, items.len(), ARRAY_LC1);
        }
        Value::Object(members) => {
            let start = open(out);
            for (name, v) in members {
                string(name, out);
                value(v, out);
            }
            close(out, start, members.len(), OBJECT_LC1);
        }
    }
}

fn number(n: &Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64() {
        integer(i, out);
    } else if let Some(u) = n.as_u64() {
        out.push(NUMBER_UINT64);
        out.extend_from_slice(&u.to_le_bytes());
    } else {
        // serde_json numbers are finite.
        out.push(NUMBER_DOUBLE);
        out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
    }
}

fn integer(i: i64, out: &mut Vec<u8>) {
    if (0..i64::from(LITERAL_INT_END)).contains(&i) {
        out.push(i as u8);
    } else if let Ok(b) = u8::try_from(i) {
        out.extend_from_slice(&[NUMBER_UINT8, b]);
    } else if let Ok(s) = i16::try_from(i) {
        out.push(NUMBER_INT16);
        out.extend_from_slice(&s.to_le_bytes());
    } else if let Ok(s) = i32::try_from(i) {
        out.push(NUMBER_INT32);
        out.extend_from_slice(&s.to_le_bytes());
    } else {
        out.push(NUMBER_INT64);
        out.extend_from_slice(&i.to_le_bytes());
    }
}

pub(super) fn string(s: &str, out: &mut Vec<u8>) {
    if let Some(m) = system_string_marker(s) {
        out.push(m);
        return;
    }
    let len = s.len();
    if len < usize::from(SHORT_STRING_END - SHORT_STRING) {
        out.push(SHORT_STRING | len as u8);
    } else if let Ok(l) = u8::try_from(len) {
        out.extend_from_slice(&[STRING_L1, l]);
    } else if let Ok(l) = u16::try_from(len) {
        out.push(STRING_L2);
        out.extend_from_slice(&l.to_le_bytes());
    } else {
        out.push(STRING_L4);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

/// Space for the most common header (marker, 2-byte length, 2-byte count); returns where the
/// container starts.
fn open(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 5]);
    start
}

/// Writes the header now that the body's size is known: `lc1` is the family's 1-byte
/// length-and-count marker (the 2- and 4-byte ones follow it). The body moves at most once.
fn close(out: &mut Vec<u8>, start: usize, count: usize, lc1: u8) {
    let body = start + 5;
    let len = out.len() - body;
    if count == 0 {
        // The family's empty marker sits five below its 1-byte length-and-count one.
        out.truncate(start);
        out.push(lc1 - 5);
    } else if len <= 0xFF && count <= 0xFF {
        out[start..start + 3].copy_from_slice(&[lc1, len as u8, count as u8]);
        out.copy_within(body.., start + 3);
        out.truncate(start + 3 + len);
    } else if len <= 0xFFFF && count <= 0xFFFF {
        out[start] = lc1 + 1;
        out[start + 1..start + 3].copy_from_slice(&(len as u16).to_le_bytes());
        out[start + 3..start + 5].copy_from_slice(&(count as u16).to_le_bytes());
    } else {
        let mut header = [0u8; 9];
        header[0] = lc1 + 2;
        header[1..5].copy_from_slice(&(len as u32).to_le_bytes());
        header[5..9].copy_from_slice(&(count as u32).to_le_bytes());
        out.splice(start..body, header);
    }
}
