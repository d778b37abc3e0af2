//! Lower-case hex text of bytes: event ids, trace and span ids, signatures.

/// Appends the lower-case hex digits of `bytes` to `out`.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 * bytes.len());
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

/// The lower-case hex digits of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 * bytes.len());
    push_hex(&mut out, bytes);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_become_two_lower_case_digits_each() {
        assert_eq!(super::to_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::to_hex(&[]), "");
    }
}
