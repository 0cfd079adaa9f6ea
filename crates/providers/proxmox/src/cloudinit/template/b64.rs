//! `b64enc`/`b64dec`: standard base64 with padding, as Go's `base64.StdEncoding` (which
//! skips line breaks when decoding and insists on the padding).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 of `input`, padded.
pub fn encode(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of padded standard base64; the error names the offending input byte as Go's
/// `illegal base64 data at input byte N` does.
pub fn decode(input: &str) -> Result<Vec<u8>, String> {
    let illegal = |at: usize| format!("illegal base64 data at input byte {at}");
    // Line breaks are skipped; positions in errors still count them.
    let symbols: Vec<(usize, u8)> = input
        .bytes()
        .enumerate()
        .filter(|&(_, b)| b != b'\r' && b != b'\n')
        .collect();
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3);
    for (q, quad) in symbols.chunks(4).enumerate() {
        let last_quad = (q + 1) * 4 >= symbols.len();
        let mut n = 0u32;
        let mut data = 0;
        for (i, &(at, b)) in quad.iter().enumerate() {
            if b == b'=' {
                // Padding: after two or three symbols, to the end of the quad, in the last one.
                if i < 2 || quad[i..].iter().any(|&(_, p)| p != b'=') || quad.len() != 4 {
                    return Err(illegal(at));
                }
                if !last_quad {
                    return Err(illegal(symbols[(q + 1) * 4].0));
                }
                break;
            }
            let Some(v) = ALPHABET.iter().position(|&a| a == b) else {
                return Err(illegal(at));
            };
            n |= (v as u32) << (18 - 6 * i);
            data += 1;
        }
        if quad.len() < 4 && data == quad.len() {
            // Missing padding: Go blames the start of the short quad.
            return Err(illegal(quad[0].0));
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..data.saturating_sub(1)]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_what_go_rejects() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("hello", "aGVsbG8="),
            ("\u{0}\u{ff}", "AMO/"),
        ] {
            assert_eq!(encode(plain.as_bytes()), encoded, "{plain:?}");
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes(), "{encoded:?}");
        }
        assert_eq!(decode("aGVs\nbG8=").unwrap(), b"hello");
        assert_eq!(
            decode("aGVsbG8").unwrap_err(),
            "illegal base64 data at input byte 4"
        );
        assert_eq!(
            decode("aGV*bG8=").unwrap_err(),
            "illegal base64 data at input byte 3"
        );
        assert_eq!(
            decode("Zg==Zg==").unwrap_err(),
            "illegal base64 data at input byte 4"
        );
        assert_eq!(
            decode("Z===").unwrap_err(),
            "illegal base64 data at input byte 1"
        );
    }
}
