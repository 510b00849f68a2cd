//! The one server-sent events parser, for every client that reads an event stream (the model
//! drivers, the A2A client, the legacy MCP HTTP+SSE transport).
//!
//! It follows the WHATWG event-stream rules: lines end in CR, LF or CRLF (also when a chunk boundary
//! splits the pair); one leading byte-order mark is dropped; lines starting with `:` are comments;
//! `field: value` loses one space after the colon, and a line without a colon is a field with an
//! empty value; `data` lines are joined with `\n`; `event` names the type (`message` when absent);
//! `id` sets the last event id (unless it holds NUL) and `retry` the reconnection time (digits only);
//! unknown fields are ignored; a blank line dispatches, and an event without data is not dispatched.
//! Text is decoded as UTF-8 with replacement, as the spec says.
//!
//! It parses bytes, not text, so a UTF-8 character or a CRLF split across network chunks is never
//! mangled, and it caps what it buffers: one line and one event. A stream that passes a cap gets one
//! [`SseError`] naming it; the parser then discards the rest of that event, up to its blank line, and
//! goes on, so a caller may skip an oversized event instead of ending the stream. Comments are never
//! buffered, so a keep-alive of any length costs nothing.
//!
//! Written here rather than taken from `eventsource-stream` or `sse-stream`: neither caps what it
//! buffers, and `sse-stream` rejects unknown fields, which the spec says to ignore.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The default cap on one event (its `data` and `event` values and the line being read): 16 MiB,
/// what rmcp uses for Streamable HTTP. No real event comes near it.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The default cap on one line; a single `data:` line may carry a whole event.
pub const DEFAULT_MAX_LINE_BYTES: usize = DEFAULT_MAX_EVENT_BYTES;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when the event had none.
    pub event: String,
    /// The `data:` values joined with `\n`.
    pub data: String,
    /// The last event id at dispatch (empty when the stream never set one), for `Last-Event-ID`.
    pub id: String,
}

/// What a stream of events may make its reader hold, and how it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Largest event: its `data` and `event` values and the line being read.
    pub max_event_bytes: usize,
    /// Longest line (comments excepted: they are never buffered).
    pub max_line_bytes: usize,
    /// Dispatch an event the stream ends without a blank line after. The spec says to drop it, but
    /// some OpenAI-compatible servers end on `data: [DONE]` without one.
    pub dispatch_unterminated: bool,
}

impl Default for SseLimits {
    /// [`DEFAULT_MAX_EVENT_BYTES`], [`DEFAULT_MAX_LINE_BYTES`], and the spec's end of stream.
    fn default() -> Self {
        SseLimits {
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            dispatch_unterminated: false,
        }
    }
}

impl SseLimits {
    /// The default line cap, the given event cap (a line is capped by it too).
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        SseLimits {
            max_event_bytes,
            max_line_bytes: max_event_bytes.min(DEFAULT_MAX_LINE_BYTES),
            ..SseLimits::default()
        }
    }

    /// Dispatches an event left unterminated by the end of the stream (see
    /// [`SseLimits::dispatch_unterminated`]).
    pub fn dispatching_unterminated(mut self) -> Self {
        self.dispatch_unterminated = true;
        self
    }
}

/// Why an event stream could not be read on.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The event was discarded; the parser goes on with the next one.
    #[error(
        "a server-sent event grew past {limit} bytes (the cap on one event); the server must send smaller events"
    )]
    EventTooLarge { limit: usize },
    /// The line's event was discarded; the parser goes on with the next one.
    #[error(
        "a server-sent event line grew past {limit} bytes (the cap on one line); the server must send shorter lines"
    )]
    LineTooLarge { limit: usize },
    /// The body broke off; nothing more comes.
    #[error("the event stream broke off")]
    Body(#[source] reqwest::Error),
}

impl SseError {
    /// An event passed a cap and was discarded; later events can still be read.
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            SseError::EventTooLarge { .. } | SseError::LineTooLarge { .. }
        )
    }
}

/// The parser itself: bytes in, events out. [`SseStream`] drives it over a response body.
#[derive(Debug)]
pub struct SseParser {
    limits: SseLimits,
    /// The first bytes of the stream, held until they show whether they are a byte-order mark.
    head: Option<Vec<u8>>,
    /// The line being read, unless it is a comment or its event is being discarded.
    line: Vec<u8>,
    /// Bytes seen on the current line, buffered or not; 0 means it is blank so far.
    line_len: usize,
    line_is_comment: bool,
    /// The previous chunk ended in CR: a leading LF completes that line ending.
    after_cr: bool,
    /// Discarding an event that passed a cap, up to its blank line.
    discarding: bool,
    event: String,
    data: Vec<u8>,
    last_event_id: String,
    reconnection_time: Option<Duration>,
    ready: VecDeque<Result<SseEvent, SseError>>,
}

impl SseParser {
    pub fn new(limits: SseLimits) -> Self {
        SseParser {
            limits,
            head: Some(Vec::new()),
            line: Vec::new(),
            line_len: 0,
            line_is_comment: false,
            after_cr: false,
            discarding: false,
            event: String::new(),
            data: Vec::new(),
            last_event_id: String::new(),
            reconnection_time: None,
            ready: VecDeque::new(),
        }
    }

    /// Feeds a chunk; what it completes is then given by [`SseParser::next_event`].
    pub fn push(&mut self, mut chunk: &[u8]) {
        if let Some(head) = &mut self.head {
            let take = chunk.len().min(BOM.len() - head.len());
            head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if head.len() < BOM.len() && BOM.starts_with(head) {
                return;
            }
            let head = self.head.take().unwrap_or_default();
            if head != BOM {
                self.push_lines(&head);
            }
        }
        self.push_lines(chunk);
    }

    /// The next completed event, or cap error, in stream order.
    pub fn next_event(&mut self) -> Option<Result<SseEvent, SseError>> {
        self.ready.pop_front()
    }

    /// The stream ended: the events still queued, and the unterminated one if
    /// [`SseLimits::dispatch_unterminated`] asks for it. The parser is then reset to a stream's start.
    pub fn finish(&mut self) {
        if let Some(head) = self.head.take()
            && head != BOM
        {
            self.push_lines(&head);
        }
        if self.limits.dispatch_unterminated {
            if self.line_len > 0 {
                self.end_line();
            }
            if !self.discarding {
                self.dispatch();
            }
        }
        let ready = std::mem::take(&mut self.ready);
        *self = SseParser {
            ready,
            last_event_id: std::mem::take(&mut self.last_event_id),
            reconnection_time: self.reconnection_time,
            ..SseParser::new(self.limits)
        };
    }

    /// The last `id:` the stream set, for a reconnection's `Last-Event-ID`.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The last valid `retry:` the stream sent.
    pub fn reconnection_time(&self) -> Option<Duration> {
        self.reconnection_time
    }

    /// Bytes held for the event being read.
    pub fn buffered(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    fn push_lines(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            if std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
                chunk = &chunk[1..];
                continue;
            }
            match chunk.iter().position(|b| matches!(b, b'\n' | b'\r')) {
                None => {
                    self.extend_line(chunk);
                    return;
                }
                Some(end) => {
                    self.extend_line(&chunk[..end]);
                    self.after_cr = chunk[end] == b'\r';
                    chunk = &chunk[end + 1..];
                    self.end_line();
                }
            }
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        let Some(&first) = bytes.first() else { return };
        if self.line_len == 0 {
            self.line_is_comment = first == b':';
        }
        self.line_len = self.line_len.saturating_add(bytes.len());
        if self.discarding || self.line_is_comment {
            return;
        }
        // Whichever cap this line passes first is the one named, however the line was chunked;
        // when both fall at the same byte, the event is what grew too large.
        let event_room = self
            .limits
            .max_event_bytes
            .saturating_sub(self.data.len() + self.event.len());
        if self.line_len > event_room.min(self.limits.max_line_bytes) {
            let error = if event_room <= self.limits.max_line_bytes {
                SseError::EventTooLarge {
                    limit: self.limits.max_event_bytes,
                }
            } else {
                SseError::LineTooLarge {
                    limit: self.limits.max_line_bytes,
                }
            };
            self.discard(error);
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// Reports the cap and drops what the event holds; its remaining lines are skipped unread.
    fn discard(&mut self, error: SseError) {
        self.ready.push_back(Err(error));
        self.discarding = true;
        self.line = Vec::new();
        self.data = Vec::new();
        self.event = String::new();
    }

    fn end_line(&mut self) {
        let blank = std::mem::take(&mut self.line_len) == 0;
        let comment = std::mem::take(&mut self.line_is_comment);
        if blank {
            if !std::mem::take(&mut self.discarding) {
                self.dispatch();
            }
            return;
        }
        if self.discarding || comment {
            return;
        }
        let line = std::mem::take(&mut self.line);
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &b""[..]),
        };
        match field {
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"id" if !value.contains(&0) => {
                self.last_event_id = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // All digits, so only an overflow fails to parse: no one means a wait that long.
                if let Some(millis) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    self.reconnection_time = Some(Duration::from_millis(millis));
                }
            }
            _ => {}
        }
        // Give the buffer back so a long stream does not reallocate for every line.
        let mut line = line;
        line.clear();
        self.line = line;
    }

    fn dispatch(&mut self) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last value
        self.ready.push_back(Ok(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: String::from_utf8_lossy(&data).into_owned(),
            id: self.last_event_id.clone(),
        }));
    }
}

/// Events read from a byte stream, such as `reqwest::Response::bytes_stream`.
pub struct SseStream<S> {
    body: S,
    parser: SseParser,
    ended: bool,
}

/// The events of a response's body, as [`SseStream::from_response`] makes them.
pub type ResponseEvents = SseStream<futures::stream::BoxStream<'static, reqwest::Result<Bytes>>>;

impl ResponseEvents {
    /// The events of a response's body.
    pub fn from_response(response: reqwest::Response, limits: SseLimits) -> Self {
        SseStream::new(response.bytes_stream().boxed(), limits)
    }
}

impl<S> SseStream<S>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    pub fn new(body: S, limits: SseLimits) -> Self {
        SseStream {
            body,
            parser: SseParser::new(limits),
            ended: false,
        }
    }

    /// The next event; `None` once the body has ended. A cap error
    /// ([`SseError::is_too_large`]) may be followed by more events; a body error ends the stream.
    pub async fn next(&mut self) -> Option<Result<SseEvent, SseError>> {
        loop {
            if let Some(item) = self.parser.next_event() {
                return Some(item);
            }
            if self.ended {
                return None;
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.parser.push(&chunk),
                Some(Err(error)) => {
                    self.ended = true;
                    return Some(Err(SseError::Body(error)));
                }
                None => {
                    self.ended = true;
                    self.parser.finish();
                }
            }
        }
    }

    /// The body has ended: an event returned now is one it left unterminated (only with
    /// [`SseLimits::dispatch_unterminated`]), which may be cut short.
    pub fn body_ended(&self) -> bool {
        self.ended
    }

    /// The parser's state: last event id, reconnection time.
    pub fn parser(&self) -> &SseParser {
        &self.parser
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: String::new(),
        }
    }

    /// Everything the parser yields for `input` fed in `piece`-byte chunks, cap errors as `Err`
    /// strings.
    fn parse_in_pieces(
        input: &[u8],
        piece: usize,
        limits: SseLimits,
    ) -> Vec<Result<SseEvent, String>> {
        let mut parser = SseParser::new(limits);
        let mut out = Vec::new();
        let mut drain = |parser: &mut SseParser| {
            while let Some(item) = parser.next_event() {
                out.push(item.map_err(|e| e.to_string()));
            }
        };
        for chunk in input.chunks(piece) {
            parser.push(chunk);
            drain(&mut parser);
        }
        parser.finish();
        drain(&mut parser);
        out
    }

    /// The same result whatever the chunking, down to one byte at a time.
    fn parse_every_way(input: &[u8], limits: SseLimits) -> Vec<Result<SseEvent, String>> {
        let whole = parse_in_pieces(input, input.len().max(1), limits);
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input, piece, limits),
                whole,
                "in pieces of {piece}"
            );
        }
        // Every two-way split too, which covers each boundary in the middle of CRLF and of a
        // multi-byte character.
        for at in 1..input.len() {
            let mut parser = SseParser::new(limits);
            let mut out = Vec::new();
            for part in [&input[..at], &input[at..]] {
                parser.push(part);
                while let Some(item) = parser.next_event() {
                    out.push(item.map_err(|e| e.to_string()));
                }
            }
            parser.finish();
            while let Some(item) = parser.next_event() {
                out.push(item.map_err(|e| e.to_string()));
            }
            assert_eq!(out, whole, "split at {at}");
        }
        whole
    }

    fn ok(events: Vec<SseEvent>) -> Vec<Result<SseEvent, String>> {
        events.into_iter().map(Ok).collect()
    }

    #[test]
    fn fields_line_endings_and_comments_survive_any_chunking() {
        let input = "\u{feff}: keep-alive\r\nevent: a\r\ndata: héllo\r\ndata:x\r\n\r\n\
                     data: {\"k\":1}\n\nevent: b\rdata: z\r\r:\n\ndata:  two spaces\n\n";
        assert_eq!(
            parse_every_way(input.as_bytes(), SseLimits::default()),
            ok(vec![
                ev("a", "héllo\nx"),
                ev("message", "{\"k\":1}"),
                ev("b", "z"),
                ev("message", " two spaces"),
            ])
        );
    }

    #[test]
    fn only_a_leading_byte_order_mark_is_dropped() {
        let input = "\u{feff}data: a\n\n\u{feff}data: b\n\n";
        assert_eq!(
            parse_every_way(input.as_bytes(), SseLimits::default()),
            // The second BOM starts a line whose field is "\u{feff}data": unknown, ignored.
            ok(vec![ev("message", "a")])
        );
        // A stream shorter than a BOM, or starting like one, is not lost.
        assert_eq!(
            parse_every_way(b"\xEF\xBBdata: c\n\n", SseLimits::default()),
            ok(vec![])
        );
        assert_eq!(
            parse_every_way(b"data", SseLimits::default().dispatching_unterminated()),
            ok(vec![ev("message", "")])
        );
    }

    #[test]
    fn fields_without_colons_unknown_fields_and_events_without_data() {
        let input = b"data\ndata\n\nfoo: bar\nevent: lonely\n\nid: 2\n\nnocolon\ndata: {}\n\n";
        assert_eq!(
            parse_every_way(input, SseLimits::default()),
            ok(vec![
                ev("message", "\n"),
                SseEvent {
                    event: "message".into(),
                    data: "{}".into(),
                    id: "2".into()
                },
            ])
        );
        // The last `event` wins; the type does not carry over to the next event.
        assert_eq!(
            parse_every_way(
                b"event: a\nevent: b\ndata: x\n\ndata: y\n\n",
                SseLimits::default()
            ),
            ok(vec![ev("b", "x"), ev("message", "y")])
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_and_does_not_affect_the_next_event() {
        assert_eq!(
            parse_every_way(b"data: \xFF\n\ndata: y\n\n", SseLimits::default()),
            ok(vec![ev("message", "\u{FFFD}"), ev("message", "y")])
        );
    }

    #[test]
    fn id_and_retry() {
        let mut parser = SseParser::new(SseLimits::default());
        parser.push(b"id: 7\nretry: 2500\ndata: a\n\nretry: soon\nretry: -1\nretry:\nid: x\0y\ndata: b\n\nid\ndata: c\n\n");
        let ids: Vec<_> = std::iter::from_fn(|| parser.next_event())
            .map(|e| e.unwrap().id)
            .collect();
        assert_eq!(ids, ["7", "7", ""]);
        assert_eq!(
            parser.reconnection_time(),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(parser.last_event_id(), "");
        parser.push(b"id: 9\n\n");
        assert_eq!(parser.last_event_id(), "9");
        assert!(
            parser.next_event().is_none(),
            "an id alone dispatches nothing"
        );
    }

    #[test]
    fn an_unterminated_last_event_is_dispatched_only_when_asked() {
        let input = b"event: x\n\ndata: [DONE]";
        assert_eq!(parse_every_way(input, SseLimits::default()), ok(vec![]));
        assert_eq!(
            parse_every_way(input, SseLimits::default().dispatching_unterminated()),
            ok(vec![ev("message", "[DONE]")])
        );
        assert_eq!(
            parse_every_way(
                b"data: a\r",
                SseLimits::default().dispatching_unterminated()
            ),
            ok(vec![ev("message", "a")])
        );
    }

    #[test]
    fn an_oversized_event_is_refused_naming_the_cap_and_the_next_one_arrives() {
        let limits = SseLimits::with_max_event_bytes(16);
        let input: &[u8] =
            b"data: ok\n\ndata: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\ndata: more\n\n\
              data: 0123456789\ndata: 0123456789\n\n\
              : a long comment does not count against the cap at all, however long\ndata: fine\n\n";
        let too_large = Err(
            "a server-sent event grew past 16 bytes (the cap on one event); the server must send smaller events"
                .to_owned(),
        );
        assert_eq!(
            parse_every_way(input, limits),
            vec![
                Ok(ev("message", "ok")),
                too_large.clone(),
                too_large,
                Ok(ev("message", "fine")),
            ]
        );
    }

    #[test]
    fn an_overlong_line_is_refused_naming_the_cap() {
        let limits = SseLimits {
            max_line_bytes: 8,
            ..SseLimits::default()
        };
        let out = parse_every_way(b"id: 123456789\ndata: a\n\ndata: b\n\n", limits);
        assert_eq!(
            out,
            vec![
                Err("a server-sent event line grew past 8 bytes (the cap on one line); the server must send shorter lines".to_owned()),
                Ok(ev("message", "b")),
            ]
        );
    }

    #[test]
    fn an_endless_line_is_refused_without_buffering_it() {
        let limits = SseLimits {
            max_line_bytes: 100,
            ..SseLimits::with_max_event_bytes(1024)
        };
        let mut parser = SseParser::new(limits);
        for _ in 0..100 {
            parser.push(&[b'a'; 1000]);
            assert!(parser.buffered() <= 100);
        }
        assert!(matches!(
            parser.next_event(),
            Some(Err(SseError::LineTooLarge { limit: 100 }))
        ));
        assert!(parser.next_event().is_none(), "one error per event");
        let mut parser = SseParser::new(SseLimits::with_max_event_bytes(1024));
        for _ in 0..100 {
            parser.push(b"data: 0123456789\n");
        }
        assert!(matches!(
            parser.next_event(),
            Some(Err(SseError::EventTooLarge { limit: 1024 }))
        ));
        assert!(parser.buffered() == 0);
    }

    #[test]
    fn random_streams_parse_the_same_in_random_chunks() {
        // Pieces that make every rule meet every other: line endings, comments, fields with and
        // without values, a BOM, multi-byte text, long values against a small cap.
        const PIECES: &[&[u8]] = &[
            b"\n",
            b"\r",
            b"\r\n",
            b"data:",
            b"data: ",
            b"event: e",
            b"id: 1",
            b"retry: 9",
            b": c",
            b":",
            b"x",
            b"\xEF\xBB\xBF",
            "é".as_bytes(),
            b"0123456789abcdef",
            b"\xFF",
            b" ",
            b"\0",
        ];
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for round in 0..300 {
            let mut input = Vec::new();
            for _ in 0..next(40) {
                input.extend_from_slice(PIECES[next(PIECES.len())]);
            }
            let limits = SseLimits {
                max_event_bytes: 24,
                max_line_bytes: 20,
                dispatch_unterminated: round % 2 == 0,
            };
            let whole = parse_in_pieces(&input, input.len().max(1), limits);
            for _ in 0..10 {
                let mut parser = SseParser::new(limits);
                let mut out = Vec::new();
                let mut rest = &input[..];
                while !rest.is_empty() {
                    let (chunk, tail) = rest.split_at(1 + next(rest.len()));
                    parser.push(chunk);
                    rest = tail;
                    while let Some(item) = parser.next_event() {
                        out.push(item.map_err(|e| e.to_string()));
                    }
                    assert!(parser.buffered() <= 24 + 20, "{input:?}");
                }
                parser.finish();
                while let Some(item) = parser.next_event() {
                    out.push(item.map_err(|e| e.to_string()));
                }
                assert_eq!(out, whole, "{:?}", String::from_utf8_lossy(&input));
            }
        }
    }

    // The cases the three parsers this one replaced were tested on (portico-llm's, the A2A
    // client's, and the legacy MCP transport's framer over `sse-stream`).

    #[test]
    fn llm_events_survive_any_chunking() {
        let input = "\u{feff}: keep-alive\r\nevent: a\r\ndata: héllo\r\ndata:x\r\n\r\n\
                     data: {\"k\":1}\n\nevent: b\rdata: z\r\rid: 7\nretry: 5\n\ndata: [DONE]\n\n";
        let with_id = |event: &str, data: &str| SseEvent {
            id: "7".into(),
            ..ev(event, data)
        };
        assert_eq!(
            parse_every_way(input.as_bytes(), SseLimits::default()),
            ok(vec![
                ev("a", "héllo\nx"),
                ev("message", "{\"k\":1}"),
                ev("b", "z"),
                with_id("message", "[DONE]"),
            ])
        );
    }

    #[test]
    fn llm_unterminated_last_event_is_kept_and_empty_events_dropped() {
        let limits = SseLimits::default().dispatching_unterminated();
        assert_eq!(
            parse_in_pieces(b"event: x\n\ndata: [DONE]", 4, limits),
            ok(vec![ev("message", "[DONE]")])
        );
        assert_eq!(
            parse_in_pieces(b"data\n\n", 3, limits),
            ok(vec![ev("message", "")])
        );
    }

    #[test]
    fn llm_an_endless_line_is_refused() {
        let mut parser = SseParser::new(SseLimits::default());
        parser.push(&vec![b'a'; DEFAULT_MAX_EVENT_BYTES + 1]);
        assert!(matches!(
            parser.next_event(),
            Some(Err(SseError::EventTooLarge { .. }))
        ));
    }

    #[test]
    fn a2a_events_split_across_chunks_and_line_endings() {
        let mut parser = SseParser::new(SseLimits::default().dispatching_unterminated());
        let mut push = |chunk: &[u8]| {
            parser.push(chunk);
            std::iter::from_fn(|| parser.next_event())
                .map(|e| e.unwrap().data)
                .collect::<Vec<_>>()
        };
        assert!(push(b": keep-alive\n\nid: 1\nda").is_empty());
        assert_eq!(push(b"ta: {\"a\":1}\r\n\r\n"), vec!["{\"a\":1}"]);
        assert_eq!(
            push(b"event: message\ndata:one\ndata: two\n\ndata: three\r"),
            vec!["one\ntwo"]
        );
        assert!(push(b"\n").is_empty());
        assert_eq!(push(b"\rdata: four\n\n"), vec!["three", "four"]);
        // A priming event with empty data is dispatched with empty data; the A2A client skips it.
        assert_eq!(push(b"id: 9\ndata:\n\n"), vec![""]);
        assert!(push(b"data: last").is_empty());
        parser.finish();
        assert_eq!(parser.next_event().unwrap().unwrap().data, "last");
        parser.finish();
        assert!(parser.next_event().is_none());
    }

    #[test]
    fn a2a_multibyte_text_split_mid_character() {
        let mut parser = SseParser::new(SseLimits::default());
        let bytes = "data: héllo\n\n".as_bytes();
        parser.push(&bytes[..8]);
        assert!(parser.next_event().is_none());
        parser.push(&bytes[8..]);
        assert_eq!(parser.next_event().unwrap().unwrap().data, "héllo");
    }

    #[test]
    fn legacy_frames_events_across_chunks_and_line_endings() {
        let mut parser = SseParser::new(SseLimits::with_max_event_bytes(1024));
        for chunk in [
            &b"\xEF\xBB\xBFevent: endpoint\r"[..],
            b"\ndata: /m?s=1\r\n\r",
            b"\ndata: a\rdata: b\r\rev",
            b"ent: message\ndata:c\n",
            b"\n",
        ] {
            parser.push(chunk);
        }
        let events: Vec<_> = std::iter::from_fn(|| parser.next_event())
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            vec![
                ev("endpoint", "/m?s=1"),
                ev("message", "a\nb"),
                ev("message", "c"),
            ]
        );
    }

    #[test]
    fn legacy_drops_comments_and_unused_or_unknown_fields() {
        let input = b": keepalive\n\n:\n\nid: 1\nretry: x\nfoo: bar\nnocolon\ndata: {}\n\nid: 2\n\ndata\ndata\n\n";
        let events: Vec<_> = parse_every_way(input, SseLimits::with_max_event_bytes(1024))
            .into_iter()
            .map(|e| e.unwrap().data)
            .collect();
        assert_eq!(events, ["{}", "\n"]);
    }

    #[test]
    fn legacy_skips_oversized_events_and_recovers() {
        let mut parser = SseParser::new(SseLimits::with_max_event_bytes(16));
        for chunk in [
            &b"data: "[..],
            &[b'x'; 40],
            b"\ndata: more\n\ndata: ok\n\n",
            b"data: 0123456789\ndata: 0123456789\n\n",
            b": a long comment does not count against the limit at all\ndata: fine\n\n",
        ] {
            parser.push(chunk);
        }
        let events: Vec<_> = std::iter::from_fn(|| parser.next_event())
            .filter_map(Result::ok)
            .map(|e| e.data)
            .collect();
        assert_eq!(events, ["ok", "fine"]);
    }

    #[tokio::test]
    async fn a_byte_stream_is_read_event_by_event() {
        let chunks: Vec<reqwest::Result<Bytes>> = vec![
            Ok(Bytes::from_static(b"data: one\r")),
            Ok(Bytes::from_static(b"\n\r\ndata: tw")),
            Ok(Bytes::from_static(b"o\n\ndata: three")),
        ];
        let mut events = SseStream::new(
            futures::stream::iter(chunks),
            SseLimits::default().dispatching_unterminated(),
        );
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            seen.push(event.unwrap().data);
        }
        assert_eq!(seen, ["one", "two", "three"]);
        assert!(events.next().await.is_none());
    }
}
