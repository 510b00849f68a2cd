//! Turning capped byte buffers into text for a model.

/// Decodes `bytes` as UTF-8, replacing invalid sequences. When the buffer was cut (`truncated`), an
/// incomplete character at the very end is a product of the cut, not of the data, so it is dropped
/// rather than shown as a replacement character. Returns the text and how many bytes it covers.
pub(crate) fn decode(mut bytes: Vec<u8>, truncated: bool) -> (String, usize) {
    if truncated {
        let keep = complete_prefix_len(&bytes);
        bytes.truncate(keep);
    }
    let len = bytes.len();
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    (text, len)
}

/// The length of `bytes` without a trailing incomplete UTF-8 sequence (at most 3 bytes).
fn complete_prefix_len(bytes: &[u8]) -> usize {
    let tail_start = bytes.len().saturating_sub(3);
    for start in (tail_start..bytes.len()).rev() {
        let byte = bytes[start];
        if byte & 0b1100_0000 == 0b1000_0000 {
            // A continuation byte: keep looking for the lead byte.
            continue;
        }
        let needed = match byte {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            // Not a lead byte at all: invalid data, which lossy decoding shows as it is.
            _ => return bytes.len(),
        };
        return if bytes.len() - start < needed {
            start
        } else {
            bytes.len()
        };
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_characters_are_dropped_only_when_truncated() {
        let euro = "a€".as_bytes().to_vec(); // 61 e2 82 ac
        assert_eq!(decode(euro[..3].to_vec(), true), ("a".to_string(), 1));
        assert_eq!(decode(euro[..2].to_vec(), true), ("a".to_string(), 1));
        assert_eq!(decode(euro.clone(), true), ("a€".to_string(), 4));
        assert_eq!(
            decode(euro[..3].to_vec(), false),
            ("a\u{fffd}".to_string(), 3)
        );
        assert_eq!(decode(vec![0xff, b'x'], true), ("\u{fffd}x".to_string(), 2));
        assert_eq!(decode(Vec::new(), true), (String::new(), 0));
    }
}
