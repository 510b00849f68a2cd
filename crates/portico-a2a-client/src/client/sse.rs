//! A minimal Server-Sent Events reader for A2A streams: what matters is each event's `data`.

/// Splits a byte stream into SSE events and returns each event's `data` (multi-line `data:` fields
/// joined with `\n`). Comments, `event:`, `id:` and `retry:` fields are skipped; events without data
/// (keep-alives, priming events) are dropped.
#[derive(Debug, Default)]
pub struct SseReader {
    buffer: Vec<u8>,
    data: Vec<String>,
}

impl SseReader {
    /// Feeds a chunk; returns the data of every event the chunk completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n' || *b == b'\r') {
            // A `\r` at the very end of the buffer may be the first half of `\r\n`: wait for more.
            if self.buffer[end] == b'\r' && end + 1 == self.buffer.len() {
                break;
            }
            let skip = if self.buffer[end] == b'\r' && self.buffer.get(end + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buffer.drain(..end + skip).take(end).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(&line, &mut events);
        }
        events
    }

    /// The data of an event the stream ended without a blank line after.
    pub fn finish(&mut self) -> Option<String> {
        if !self.buffer.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.buffer)).into_owned();
            let mut events = Vec::new();
            self.line(&line, &mut events);
            if let Some(event) = events.pop() {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) {
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                events.push(event);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            self.data.push(value.to_string());
        }
    }

    /// Bytes held for the event being read; callers cap it so a stream that never ends an event cannot
    /// grow without bound.
    pub fn pending(&self) -> usize {
        self.buffer.len() + self.data.iter().map(String::len).sum::<usize>()
    }

    fn dispatch(&mut self) -> Option<String> {
        if self.data.is_empty() {
            return None;
        }
        let data = std::mem::take(&mut self.data).join("\n");
        (!data.trim().is_empty()).then_some(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut reader = SseReader::default();
        assert!(reader.push(b": keep-alive\n\nid: 1\nda").is_empty());
        assert_eq!(reader.push(b"ta: {\"a\":1}\r\n\r\n"), vec!["{\"a\":1}"]);
        assert_eq!(
            reader.push(b"event: message\ndata:one\ndata: two\n\ndata: three\r"),
            vec!["one\ntwo"]
        );
        assert!(reader.push(b"\n").is_empty());
        assert_eq!(reader.push(b"\rdata: four\n\n"), vec!["three", "four"]);
        // A priming event with empty data is dropped.
        assert!(reader.push(b"id: 9\ndata:\n\n").is_empty());
        reader.push(b"data: last");
        assert_eq!(reader.finish().as_deref(), Some("last"));
        assert_eq!(reader.finish(), None);
    }

    #[test]
    fn multibyte_text_split_mid_character() {
        let mut reader = SseReader::default();
        let bytes = "data: héllo\n\n".as_bytes();
        assert!(reader.push(&bytes[..8]).is_empty());
        assert_eq!(reader.push(&bytes[8..]), vec!["héllo"]);
    }
}
