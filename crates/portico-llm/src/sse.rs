//! A minimal server-sent events parser (the WHATWG event-stream format).
//!
//! Written here rather than taken from `eventsource-stream` & co.: the format is a few dozen lines,
//! the drivers only need `event` and `data`, and owning it lets us parse on bytes (so a UTF-8
//! character or a `\r\n` split across network chunks is never mangled) and cap how much one event may
//! buffer, which those crates do not.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when absent (the spec's default "message").
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// A provider that never ends a line could make us buffer without bound; no real event comes near.
pub(crate) const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    /// The previous chunk ended in `\r`, so a leading `\n` is the rest of that line break.
    after_cr: bool,
    started: bool,
}

impl SseParser {
    /// Feeds a chunk, returning the events it completed. Errs when one event outgrows
    /// [`MAX_EVENT_BYTES`].
    pub(crate) fn push(&mut self, mut chunk: &[u8]) -> Result<Vec<SseEvent>, usize> {
        let mut out = Vec::new();
        if chunk.is_empty() {
            return Ok(out);
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&chunk[..end]);
            let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
            if chunk[end] == b'\r' && end + 1 == chunk.len() {
                self.after_cr = true;
            }
            chunk = &chunk[end + if crlf { 2 } else { 1 }..];
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.take_line(&line) {
                out.push(event);
            }
        }
        self.line.extend_from_slice(chunk);
        let size = self.line.len() + self.data.len();
        if size > MAX_EVENT_BYTES {
            return Err(size);
        }
        Ok(out)
    }

    /// The stream ended. A final event not followed by a blank line is dispatched anyway: the spec
    /// says to drop it, but some OpenAI-compatible servers end on `data: [DONE]` without one.
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty()
            && let Some(event) = self.take_line(&line)
        {
            return Some(event);
        }
        self.dispatch()
    }

    fn take_line(&mut self, mut line: &[u8]) -> Option<SseEvent> {
        if !self.started {
            self.started = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None; // comment / keep-alive
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields mean nothing to a one-shot completion stream
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            out.extend(p.push(chunk).unwrap());
        }
        out.extend(p.finish());
        out
    }

    #[test]
    fn events_survive_any_chunking() {
        let input = "\u{feff}: keep-alive\r\nevent: a\r\ndata: héllo\r\ndata:x\r\n\r\n\
                     data: {\"k\":1}\n\nevent: b\rdata: z\r\rid: 7\nretry: 5\n\ndata: [DONE]\n\n";
        let expected = vec![ev("a", "héllo\nx"), ev("", "{\"k\":1}"), ev("b", "z")];
        let mut with_done = expected.clone();
        with_done.push(ev("", "[DONE]"));
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), piece),
                with_done,
                "piece {piece}"
            );
        }
    }

    #[test]
    fn unterminated_last_event_is_kept_and_empty_events_dropped() {
        assert_eq!(
            parse_in_pieces(b"event: x\n\ndata: [DONE]", 4),
            vec![ev("", "[DONE]")]
        );
        assert_eq!(parse_in_pieces(b"data\n\n", 3), vec![ev("", "")]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = SseParser::default();
        let big = vec![b'a'; MAX_EVENT_BYTES + 1];
        assert!(p.push(&big).is_err());
    }
}
