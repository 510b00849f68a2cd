//! The byte-level framing state machine.
//!
//! [`FrameDecoder`] is fed whatever bytes the reader happens to have
//! ([`FrameDecoder::decode`]) and reports at most one [`Event`] per call,
//! saying how many bytes it consumed. It keeps all of its progress in
//! `self`, so a message may arrive split at any byte boundary, and it never
//! holds more than `max_message_bytes` (plus small, fixed-size scratch) of a
//! single message: oversized messages are counted and discarded as they
//! stream past.
//!
//! It does no I/O and no JSON-RPC interpretation; [`crate::classify`] turns
//! message bodies into rmcp messages or error replies.

use crate::Framing;

/// How much of a discarded message is kept to recover its `"id"` from.
pub(crate) const ID_PREFIX_BYTES: usize = 16 * 1024;

/// Cap on a whole `Content-Length` header block (all header lines).
pub(crate) const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Longest header name the sniffer collects before deciding "not a header".
const MAX_SNIFF_BYTES: usize = 32;

/// Header names that switch a message into `Content-Length` mode when they
/// open it. These are the two headers of the LSP base protocol, which is the
/// framing the reference system used.
const FRAMING_HEADERS: [&[u8]; 2] = [b"content-length", b"content-type"];

/// Something the decoder found in the input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A complete message body (not yet known to be JSON).
    Message { framing: Framing, body: Vec<u8> },
    /// A message larger than the cap was consumed and discarded.
    Oversized {
        framing: Framing,
        /// Size of the message body in bytes (without framing).
        size: u64,
        /// The first [`ID_PREFIX_BYTES`] of the body, for id recovery.
        prefix: Vec<u8>,
    },
    /// A `Content-Length` header block was unusable; the message (and the
    /// JSON value right after the header block, if any) was discarded.
    BadHeader {
        reason: String,
        /// Start of the skipped body, for id recovery.
        prefix: Vec<u8>,
    },
    /// The input ended in the middle of a `Content-Length` message.
    Truncated {
        /// Body bytes received; `None` when the input ended inside the
        /// header block.
        received: Option<u64>,
        /// The declared body length, when the header block was complete.
        expected: Option<u64>,
        /// Start of the partial body, for id recovery.
        prefix: Vec<u8>,
    },
}

/// What to report once a newline-terminated drain reaches its newline.
#[derive(Debug)]
enum DrainEnd {
    Oversized(Framing),
    /// The body of a `Content-Length` message already refused for its declared `size`: it ends
    /// at a newline or once the `left` bytes still declared have been read, whichever comes first.
    RefusedBody {
        size: u64,
        left: u64,
    },
}

#[derive(Debug, Default)]
struct Headers {
    content_length: Option<u64>,
    error: Option<String>,
    /// Header bytes consumed by complete lines so far.
    bytes: usize,
}

#[derive(Debug)]
enum State {
    /// Between messages: skipping whitespace and blank lines.
    Idle,
    /// At the start of a message that opens with a letter: collecting what
    /// may be a header name into `buf`.
    Sniff,
    /// Newline framing: collecting a line into `buf`.
    Line,
    /// Discarding up to and including the next `\n`; `cr` says whether the
    /// last byte discarded was a `\r`.
    Drain { seen: u64, cr: bool, then: DrainEnd },
    /// `Content-Length` framing: collecting a header line into `buf`.
    Header(Headers),
    /// `Content-Length` framing: collecting `len` body bytes into `buf`.
    Body { len: usize },
    /// A header block grew past [`MAX_HEADER_BYTES`]: discarding the rest of it line by line,
    /// without keeping it, so that neither its later lines nor its body are read as messages.
    DiscardHeaders {
        reason: String,
        line: HeaderLineScan,
    },
    /// A header block was unusable; deciding whether a body follows.
    AfterBadHeader { reason: String },
    /// Skipping the JSON value that followed an unusable header block.
    SkipValue {
        reason: String,
        scan: JsonScan,
        seen: u64,
    },
}

/// Incremental scanner that finds the end of a JSON object or array by
/// tracking nesting and string literals; it does not validate anything.
#[derive(Debug, Default, Clone)]
pub(crate) struct JsonScan {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonScan {
    /// Feed bytes; returns how many were consumed up to and including the
    /// bracket that closes the outermost value, or `None` if it is still open.
    /// A raw newline inside a string also ends it: JSON forbids one there, so
    /// what is being skipped is not a JSON body, and the newline is where the
    /// next newline-framed message starts (every line of JSON has balanced
    /// quotes, so a skip that opened inside a string meets its first newline
    /// still inside it).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate() {
            if self.in_string {
                if b == b'\n' {
                    return Some(i + 1);
                }
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// How one line of a discarded header block ended.
#[derive(Debug, PartialEq, Eq)]
enum HeaderLineEnd {
    /// An empty line: the header block is over.
    Blank,
    /// `name:` and anything: still the header block.
    Header,
    /// Not a header: ends the block, as in [`Headers::line`].
    NotHeader,
}

/// Classifies the lines of a header block as they stream past, keeping only counters.
#[derive(Debug, Default, Clone)]
pub(crate) struct HeaderLineScan {
    bytes: usize,
    name: usize,
    header: Option<bool>,
}

impl HeaderLineScan {
    /// Feed bytes; returns how many were consumed up to and including the
    /// line's `\n` and how the line ended, or `None` if it is still open.
    fn feed(&mut self, bytes: &[u8]) -> Option<(usize, HeaderLineEnd)> {
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                // Empty, or a lone `\r`: nothing but the line end.
                let blank = self.name == 0 && self.header.is_none() && self.bytes <= 1;
                let end = match self.header {
                    Some(true) => HeaderLineEnd::Header,
                    _ if blank => HeaderLineEnd::Blank,
                    _ => HeaderLineEnd::NotHeader,
                };
                *self = HeaderLineScan::default();
                return Some((i + 1, end));
            }
            self.bytes += 1;
            if self.header.is_some() {
                continue;
            }
            if b == b'\r' && self.bytes == 1 {
                // Blank if the `\n` comes next.
                continue;
            }
            if b == b':' {
                self.header = Some(self.name > 0);
            } else if (is_token(b) || b == b'_') && self.bytes == self.name + 1 {
                self.name += 1;
            } else {
                self.header = Some(false);
            }
        }
        None
    }
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    max: usize,
    state: State,
    /// The line, header line or body being collected.
    buf: Vec<u8>,
    /// Start of a message being discarded, for id recovery.
    prefix: Vec<u8>,
    /// A `Content-Length` just refused as over the cap (its declared size, and how many of those
    /// bytes may still follow): a line that follows it and is over the cap too is taken to be its
    /// body and discarded up to that length; anything else is read as the next message.
    refused: Option<(u64, u64)>,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn is_framing_header(name: &[u8]) -> bool {
    FRAMING_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h))
}

fn extend_prefix(prefix: &mut Vec<u8>, bytes: &[u8]) {
    let room = ID_PREFIX_BYTES.saturating_sub(prefix.len());
    prefix.extend_from_slice(&bytes[..room.min(bytes.len())]);
}

fn parse_content_length(value: &[u8]) -> Result<u64, String> {
    let value = trim_ows(value);
    let shown = String::from_utf8_lossy(value);
    if value.is_empty() {
        return Err("empty Content-Length value".to_owned());
    }
    if !value.iter().all(u8::is_ascii_digit) {
        return Err(format!("invalid Content-Length value {shown:?}"));
    }
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| format!("Content-Length value {shown} is out of range"))
}

impl Headers {
    /// Record one non-empty header line. `Err` means the line is not a
    /// header at all, which ends the header block.
    fn line(&mut self, line: &[u8]) -> Result<(), String> {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err("header line without a colon".to_owned());
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| is_token(b) || b == b'_') {
            return Err(format!(
                "malformed header name {:?}",
                String::from_utf8_lossy(name)
            ));
        }
        if !name.eq_ignore_ascii_case(b"content-length") {
            return Ok(());
        }
        match parse_content_length(value) {
            Ok(n) => match self.content_length {
                Some(previous) if previous != n => {
                    self.error.get_or_insert_with(|| {
                        format!("conflicting Content-Length headers ({previous} and {n})")
                    });
                }
                _ => self.content_length = Some(n),
            },
            Err(reason) => {
                self.error.get_or_insert(reason);
            }
        }
        Ok(())
    }
}

impl FrameDecoder {
    pub(crate) fn new(max_message_bytes: usize) -> Self {
        Self {
            max: max_message_bytes,
            state: State::Idle,
            buf: Vec::new(),
            prefix: Vec::new(),
            refused: None,
        }
    }

    /// Consume bytes from `input`. Returns how many were consumed and the
    /// event they completed, if any. Stops right after the first event, so
    /// the caller should call again with the unconsumed rest.
    pub(crate) fn decode(&mut self, input: &[u8]) -> (usize, Option<Event>) {
        let mut pos = 0;
        while pos < input.len() {
            let rest = &input[pos..];
            let state = std::mem::replace(&mut self.state, State::Idle);
            let (used, next, event) = self.step(state, rest);
            pos += used;
            self.state = next;
            if event.is_some() {
                return (pos, event);
            }
        }
        (pos, None)
    }

    /// The input ended. Reports what was in flight, if anything, and resets.
    pub(crate) fn finish(&mut self) -> Option<Event> {
        let state = std::mem::replace(&mut self.state, State::Idle);
        let prefix = std::mem::take(&mut self.prefix);
        let buf = std::mem::take(&mut self.buf);
        let refused = self.refused.take();
        match state {
            State::Idle => None,
            // The start of the body of a length refused just now, cut short by the end.
            State::Sniff | State::Line if refused.is_some() => {
                let (size, _) = refused?;
                let mut prefix = buf;
                prefix.truncate(ID_PREFIX_BYTES);
                Some(Event::Oversized {
                    framing: Framing::ContentLength,
                    size,
                    prefix,
                })
            }
            // An unterminated last line is still a whole message: it is
            // handed on and is answered like any other (a parse error if it
            // is truncated JSON).
            State::Sniff | State::Line => Some(Event::Message {
                framing: Framing::Newline,
                body: buf,
            }),
            State::Drain { seen, then, .. } => Some(match then {
                DrainEnd::Oversized(framing) => Event::Oversized {
                    framing,
                    size: seen,
                    prefix,
                },
                DrainEnd::RefusedBody { size, .. } => Event::Oversized {
                    framing: Framing::ContentLength,
                    size,
                    prefix,
                },
            }),
            State::Header(_) => Some(Event::Truncated {
                received: None,
                expected: None,
                prefix,
            }),
            State::Body { len } => {
                let mut prefix = buf;
                prefix.truncate(ID_PREFIX_BYTES);
                Some(Event::Truncated {
                    received: Some(prefix.len() as u64),
                    expected: Some(len as u64),
                    prefix,
                })
            }
            State::AfterBadHeader { reason }
            | State::SkipValue { reason, .. }
            | State::DiscardHeaders { reason, .. } => Some(Event::BadHeader { reason, prefix }),
        }
    }

    /// One transition: returns bytes consumed, the next state and an event.
    fn step(&mut self, state: State, rest: &[u8]) -> (usize, State, Option<Event>) {
        match state {
            State::Idle => {
                let skip = rest.iter().take_while(|&&b| is_space(b)).count();
                if let Some((_, left)) = &mut self.refused {
                    *left = left.saturating_sub(skip as u64);
                }
                let next = if skip < rest.len() {
                    State::Sniff
                } else {
                    State::Idle
                };
                (skip, next, None)
            }
            State::Sniff => self.sniff(rest),
            State::Line => self.line(rest),
            State::Drain { seen, cr, then } => self.drain(rest, seen, cr, then),
            State::Header(headers) => self.header(rest, headers),
            State::Body { len } => {
                let take = (len - self.buf.len()).min(rest.len());
                self.buf.extend_from_slice(&rest[..take]);
                if self.buf.len() == len {
                    let body = std::mem::take(&mut self.buf);
                    let event = Event::Message {
                        framing: Framing::ContentLength,
                        body,
                    };
                    (take, State::Idle, Some(event))
                } else {
                    (take, State::Body { len }, None)
                }
            }
            State::DiscardHeaders { reason, mut line } => match line.feed(rest) {
                None => (rest.len(), State::DiscardHeaders { reason, line }, None),
                Some((used, HeaderLineEnd::Header)) => {
                    (used, State::DiscardHeaders { reason, line }, None)
                }
                Some((used, HeaderLineEnd::Blank)) => {
                    (used, State::AfterBadHeader { reason }, None)
                }
                Some((used, HeaderLineEnd::NotHeader)) => {
                    let event = Event::BadHeader {
                        reason,
                        prefix: Vec::new(),
                    };
                    (used, State::Idle, Some(event))
                }
            },
            State::AfterBadHeader { reason } => {
                if matches!(rest[0], b'{' | b'[') {
                    let next = State::SkipValue {
                        reason,
                        scan: JsonScan::default(),
                        seen: 0,
                    };
                    (0, next, None)
                } else {
                    let event = Event::BadHeader {
                        reason,
                        prefix: Vec::new(),
                    };
                    (0, State::Idle, Some(event))
                }
            }
            State::SkipValue {
                reason,
                mut scan,
                seen,
            } => {
                // Give up on input that is not the JSON body we hoped for
                // rather than skipping forever; whatever follows is read as
                // new messages. The give-up point is one byte past the cap,
                // wherever the reads happen to end: feeding the scanner a
                // whole read let it swallow up to a read's worth more, so
                // what came next depended on read boundaries.
                let room = (self.max as u64 + 1).saturating_sub(seen);
                let window = &rest[..usize::try_from(room).unwrap_or(usize::MAX).min(rest.len())];
                let done = scan.feed(window);
                let take = done.unwrap_or(window.len());
                extend_prefix(&mut self.prefix, &rest[..take]);
                let seen = seen + take as u64;
                if done.is_some() || seen > self.max as u64 {
                    let event = Event::BadHeader {
                        reason,
                        prefix: std::mem::take(&mut self.prefix),
                    };
                    (take, State::Idle, Some(event))
                } else {
                    (take, State::SkipValue { reason, scan, seen }, None)
                }
            }
        }
    }

    fn sniff(&mut self, rest: &[u8]) -> (usize, State, Option<Event>) {
        let b = rest[0];
        if self.buf.is_empty() && !b.is_ascii_alphabetic() {
            return (0, State::Line, None);
        }
        if is_token(b) && self.buf.len() < MAX_SNIFF_BYTES {
            self.buf.push(b);
            return (1, State::Sniff, None);
        }
        if b == b':' && is_framing_header(&self.buf) {
            // The sniffed name stays in `buf` as the start of the first
            // header line; the colon is read by the header state.
            self.refused = None;
            return (0, State::Header(Headers::default()), None);
        }
        (0, State::Line, None)
    }

    fn line(&mut self, rest: &[u8]) -> (usize, State, Option<Event>) {
        let newline = rest.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(rest.len());
        let chunk = &rest[..take];
        let total = self.buf.len() + take;
        let cr = chunk.last().or(self.buf.last()) == Some(&b'\r');
        // A `\r` before the `\n` is framing, not message; while the line is
        // still open its last byte may turn out to be that `\r`.
        let fits = match newline {
            Some(_) => total - usize::from(cr) <= self.max,
            None => total <= self.max.saturating_add(1),
        };
        if !fits {
            self.prefix.clear();
            extend_prefix(&mut self.prefix, &self.buf);
            if let Some((size, left)) = self.refused.take() {
                // The body of the length refused just now: discarded up to that length, so that
                // a message right after it (with no newline between) is read whole.
                let seen = self.buf.len() as u64;
                self.buf = Vec::new();
                let then = DrainEnd::RefusedBody {
                    size,
                    left: left.saturating_sub(seen),
                };
                return (0, State::Drain { seen, cr, then }, None);
            }
            extend_prefix(&mut self.prefix, chunk);
            self.buf = Vec::new();
            return match newline {
                Some(_) => {
                    let event = Event::Oversized {
                        framing: Framing::Newline,
                        size: (total - usize::from(cr)) as u64,
                        prefix: std::mem::take(&mut self.prefix),
                    };
                    (take + 1, State::Idle, Some(event))
                }
                None => {
                    let next = State::Drain {
                        seen: total as u64,
                        cr,
                        then: DrainEnd::Oversized(Framing::Newline),
                    };
                    (take, next, None)
                }
            };
        }
        self.buf.extend_from_slice(chunk);
        if newline.is_none() {
            return (take, State::Line, None);
        }
        if cr {
            self.buf.pop();
        }
        self.refused = None;
        let event = Event::Message {
            framing: Framing::Newline,
            body: std::mem::take(&mut self.buf),
        };
        (take + 1, State::Idle, Some(event))
    }

    fn drain(
        &mut self,
        rest: &[u8],
        seen: u64,
        cr: bool,
        then: DrainEnd,
    ) -> (usize, State, Option<Event>) {
        let framing = match then {
            DrainEnd::Oversized(framing) => framing,
            DrainEnd::RefusedBody { size, left } => return self.drain_refused(rest, size, left),
        };
        let newline = rest.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(rest.len());
        extend_prefix(&mut self.prefix, &rest[..take]);
        let seen = seen + take as u64;
        let cr = if take > 0 {
            rest[take - 1] == b'\r'
        } else {
            cr
        };
        if newline.is_none() {
            return (take, State::Drain { seen, cr, then }, None);
        }
        let event = Event::Oversized {
            framing,
            size: seen - u64::from(cr),
            prefix: std::mem::take(&mut self.prefix),
        };
        (take + 1, State::Idle, Some(event))
    }

    /// [`DrainEnd::RefusedBody`]: up to a newline or `left` more bytes, whichever comes first.
    fn drain_refused(
        &mut self,
        rest: &[u8],
        size: u64,
        left: u64,
    ) -> (usize, State, Option<Event>) {
        let window = usize::try_from(left).unwrap_or(usize::MAX).min(rest.len());
        let newline = rest[..window].iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(window);
        extend_prefix(&mut self.prefix, &rest[..take]);
        let left = left - take as u64;
        if newline.is_none() && left > 0 {
            let then = DrainEnd::RefusedBody { size, left };
            let next = State::Drain {
                seen: 0,
                cr: false,
                then,
            };
            return (take, next, None);
        }
        let event = Event::Oversized {
            framing: Framing::ContentLength,
            size,
            prefix: std::mem::take(&mut self.prefix),
        };
        (
            take + usize::from(newline.is_some()),
            State::Idle,
            Some(event),
        )
    }

    fn header(&mut self, rest: &[u8], mut headers: Headers) -> (usize, State, Option<Event>) {
        let newline = rest.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(rest.len());
        if headers.bytes + self.buf.len() + take > MAX_HEADER_BYTES {
            // The rest of the block and its body are discarded as they stream past; the line cut
            // here is classified from what was collected of it.
            let reason = format!("header block exceeds {MAX_HEADER_BYTES} bytes");
            let mut line = HeaderLineScan::default();
            let partial = std::mem::take(&mut self.buf);
            let _ = line.feed(&partial);
            return (0, State::DiscardHeaders { reason, line }, None);
        }
        self.buf.extend_from_slice(&rest[..take]);
        if newline.is_none() {
            return (take, State::Header(headers), None);
        }
        let used = take + 1;
        headers.bytes += self.buf.len() + 1;
        let line = std::mem::take(&mut self.buf);
        let line = strip_cr(&line);
        if !line.is_empty() {
            return match headers.line(line) {
                Ok(()) => (used, State::Header(headers), None),
                // Not a header: the header block is over and the line that
                // ended it (often a body sent without the blank line) is
                // gone with it.
                Err(reason) => {
                    let event = Event::BadHeader {
                        reason,
                        prefix: Vec::new(),
                    };
                    (used, State::Idle, Some(event))
                }
            };
        }
        // End of the header block.
        let len = match (headers.error, headers.content_length) {
            (Some(reason), _) => return (used, State::AfterBadHeader { reason }, None),
            (None, None) => {
                let reason = "missing Content-Length header".to_owned();
                return (used, State::AfterBadHeader { reason }, None);
            }
            (None, Some(len)) => len,
        };
        match usize::try_from(len) {
            Ok(len) if len <= self.max => {
                if len == 0 {
                    let event = Event::Message {
                        framing: Framing::ContentLength,
                        body: Vec::new(),
                    };
                    return (used, State::Idle, Some(event));
                }
                self.buf = Vec::with_capacity(len.min(1 << 20));
                (used, State::Body { len }, None)
            }
            _ => {
                // Refused at once: waiting for a body to decide would keep the answer back until
                // the next message came, and then take that message for the body.
                self.prefix.clear();
                self.refused = Some((len, len));
                let event = Event::Oversized {
                    framing: Framing::ContentLength,
                    size: len,
                    prefix: Vec::new(),
                };
                (used, State::Idle, Some(event))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` in chunks of `chunk` bytes, collecting every event.
    fn run(max: usize, input: &[u8], chunk: usize) -> Vec<Event> {
        let mut decoder = FrameDecoder::new(max);
        let mut events = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            let mut piece = piece;
            while !piece.is_empty() {
                let (used, event) = decoder.decode(piece);
                // Progress on every call, or the reader would spin.
                assert!(used > 0 || event.is_some());
                piece = &piece[used..];
                events.extend(event);
            }
        }
        events.extend(decoder.finish());
        events
    }

    /// Every chunk size gives the same events as one big chunk.
    fn run_all_splits(max: usize, input: &[u8]) -> Vec<Event> {
        let whole = run(max, input, input.len());
        for chunk in 1..input.len().min(64) {
            assert_eq!(run(max, input, chunk), whole, "chunk size {chunk}");
        }
        whole
    }

    /// Found by fuzzing (`stdio_framing`): the orphaned body after a bad header block is skipped up
    /// to the cap, and what follows it must be the same whatever the read boundaries.
    #[test]
    fn an_unterminated_orphan_body_gives_up_at_the_same_byte_for_every_split() {
        let input = b"Content-Type: x\r\n\r\n{\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
        let events = run_all_splits(48, input);
        assert!(
            matches!(&events[0], Event::BadHeader { reason, .. } if reason == "missing Content-Length header"),
            "{events:?}"
        );
        // The skip stops 49 bytes into the body; the rest of that line is read as the next
        // message, and the ping after it is intact.
        assert_eq!(events[1], msg(Framing::Newline, &"x".repeat(39)));
        assert_eq!(
            events[2],
            msg(
                Framing::Newline,
                r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#
            )
        );
    }

    fn msg(framing: Framing, body: &str) -> Event {
        Event::Message {
            framing,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn newline_messages_with_blank_lines_and_crlf() {
        let events = run_all_splits(1024, b"\n\r\n  {\"a\":1}\r\n\n{\"b\":2}\n");
        assert_eq!(
            events,
            vec![
                msg(Framing::Newline, "{\"a\":1}"),
                msg(Framing::Newline, "{\"b\":2}")
            ]
        );
    }

    #[test]
    fn content_length_messages_back_to_back() {
        let events = run_all_splits(
            1024,
            b"Content-Length: 7\r\n\r\n{\"a\":1}content-length:7\n\n{\"b\":2}",
        );
        assert_eq!(
            events,
            vec![
                msg(Framing::ContentLength, "{\"a\":1}"),
                msg(Framing::ContentLength, "{\"b\":2}")
            ]
        );
    }

    #[test]
    fn extra_headers_in_any_order_are_ignored() {
        let input = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\
                      CONTENT-LENGTH:   2  \r\nX-Other: y\r\n\r\n{}";
        assert_eq!(
            run_all_splits(1024, input),
            vec![msg(Framing::ContentLength, "{}")]
        );
    }

    #[test]
    fn body_bytes_are_not_chars() {
        let body = "{\"s\":\"é→😀\"}";
        let input = format!("Content-Length: {}\r\n\r\n{body}\n", body.len());
        assert_eq!(
            run_all_splits(1024, input.as_bytes()),
            vec![msg(Framing::ContentLength, body)]
        );
    }

    #[test]
    fn mixed_framings() {
        let input = b"{\"n\":1}\nContent-Length: 7\r\n\r\n{\"c\":2}\n{\"n\":3}\n";
        assert_eq!(
            run_all_splits(1024, input),
            vec![
                msg(Framing::Newline, "{\"n\":1}"),
                msg(Framing::ContentLength, "{\"c\":2}"),
                msg(Framing::Newline, "{\"n\":3}"),
            ]
        );
    }

    #[test]
    fn words_that_are_not_framing_headers_are_lines() {
        let input = b"hello: world\nContent-Lengthy: 3\nContent-Length 3\n";
        assert_eq!(
            run_all_splits(1024, input),
            vec![
                msg(Framing::Newline, "hello: world"),
                msg(Framing::Newline, "Content-Lengthy: 3"),
                msg(Framing::Newline, "Content-Length 3"),
            ]
        );
    }

    #[test]
    fn oversized_line_is_drained_with_prefix() {
        let big = format!("{{\"id\":7,\"x\":\"{}\"}}", "a".repeat(100));
        let input = format!("{big}\r\n{{}}\n");
        let events = run_all_splits(50, input.as_bytes());
        assert_eq!(
            events,
            vec![
                Event::Oversized {
                    framing: Framing::Newline,
                    size: big.len() as u64,
                    prefix: format!("{big}\r").into_bytes(),
                },
                msg(Framing::Newline, "{}"),
            ]
        );
    }

    #[test]
    fn line_exactly_at_the_cap_is_accepted() {
        let line = "x".repeat(10);
        let input = format!("{line}\r\n{line}\n");
        assert_eq!(
            run_all_splits(10, input.as_bytes()),
            vec![msg(Framing::Newline, &line), msg(Framing::Newline, &line)]
        );
        assert!(matches!(
            run(9, input.as_bytes(), 3)[0],
            Event::Oversized { size: 10, .. }
        ));
    }

    /// Refused at once, when its header block ends; the body that follows is discarded for its
    /// declared length and answered again with its id, and the next message is read whole.
    #[test]
    fn oversized_content_length_is_refused_at_once_and_its_body_drained() {
        let body = format!("{{\"id\":5,\"x\":\"{}\"}}", "y".repeat(100));
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        let oversized = |prefix: &str| Event::Oversized {
            framing: Framing::ContentLength,
            size: body.len() as u64,
            prefix: prefix.as_bytes().to_vec(),
        };
        let mut decoder = FrameDecoder::new(50);
        assert_eq!(
            decoder.decode(header.as_bytes()),
            (header.len(), Some(oversized(""))),
            "refused before any of the body is read"
        );
        let input = format!("{header}{body}Content-Length: 2\r\n\r\n{{}}");
        assert_eq!(
            run_all_splits(50, input.as_bytes()),
            vec![
                oversized(""),
                oversized(&body),
                msg(Framing::ContentLength, "{}"),
            ]
        );
    }

    /// A declared length of 2^63 used to be drained byte by byte: forever, swallowing every later
    /// message; then it waited for the next message and took it for its body. It is refused as
    /// soon as its header block ends, and the next message, header or line, is read.
    #[test]
    fn lying_content_length_is_refused_at_once_and_later_messages_survive() {
        let huge = "Content-Length: 9223372036854775808\r\n\r\n";
        let oversized = |prefix: &str| Event::Oversized {
            framing: Framing::ContentLength,
            size: 9_223_372_036_854_775_808,
            prefix: prefix.as_bytes().to_vec(),
        };
        let mut decoder = FrameDecoder::new(1024);
        assert_eq!(
            decoder.decode(huge.as_bytes()),
            (huge.len(), Some(oversized(""))),
            "refused with nothing after it"
        );
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(
            run_all_splits(1024, format!("{huge}{ping}\n{{\"id\":2}}\n").as_bytes()),
            vec![
                oversized(""),
                msg(Framing::Newline, ping),
                msg(Framing::Newline, "{\"id\":2}")
            ]
        );
        assert_eq!(
            run_all_splits(
                1024,
                format!("{huge}Content-Length: 2\r\n\r\n{{}}").as_bytes()
            ),
            vec![oversized(""), msg(Framing::ContentLength, "{}")]
        );
        // A line over the cap after it is its body: discarded up to the newline.
        let big = format!("{{\"id\":3,\"x\":\"{}\"}}", "z".repeat(40));
        assert_eq!(
            run_all_splits(16, format!("{huge}  {big}\n{{\"id\":4}}\n").as_bytes()),
            vec![
                oversized(""),
                oversized(&big),
                msg(Framing::Newline, "{\"id\":4}")
            ]
        );
    }

    #[test]
    fn bad_content_length_skips_the_body() {
        for (header, reason) in [
            (
                "Content-Length: abc",
                "invalid Content-Length value \"abc\"",
            ),
            ("Content-Length: -5", "invalid Content-Length value \"-5\""),
            ("Content-Length:", "empty Content-Length value"),
            (
                "Content-Length: 99999999999999999999999",
                "Content-Length value 99999999999999999999999 is out of range",
            ),
            (
                "Content-Length: 2\r\nContent-Length: 3",
                "conflicting Content-Length headers (2 and 3)",
            ),
            ("Content-Type: x", "missing Content-Length header"),
        ] {
            let body = r#"{"id":4,"s":"}\""}"#;
            let input = format!("{header}\r\n\r\n{body}{{\"next\":1}}\n");
            assert_eq!(
                run_all_splits(1024, input.as_bytes()),
                vec![
                    Event::BadHeader {
                        reason: reason.to_owned(),
                        prefix: body.as_bytes().to_vec()
                    },
                    msg(Framing::Newline, "{\"next\":1}"),
                ],
                "{header}"
            );
        }
    }

    #[test]
    fn bad_content_length_without_body() {
        let input = b"Content-Length: x\r\n\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            run_all_splits(1024, input),
            vec![
                Event::BadHeader {
                    reason: "invalid Content-Length value \"x\"".to_owned(),
                    prefix: Vec::new()
                },
                msg(Framing::ContentLength, "{}"),
            ]
        );
    }

    #[test]
    fn body_without_blank_line_ends_the_header_block() {
        let input = b"Content-Length: 2\r\n{}\r\n{\"n\":1}\n";
        assert_eq!(
            run_all_splits(1024, input),
            vec![
                Event::BadHeader {
                    reason: "header line without a colon".to_owned(),
                    prefix: Vec::new()
                },
                msg(Framing::Newline, "{\"n\":1}"),
            ]
        );
    }

    /// The rest of an over-long header block, and the body after it, are discarded with it: they
    /// used to be read as the next messages.
    #[test]
    fn huge_header_block_is_rejected_with_its_body() {
        let reason = format!("header block exceeds {MAX_HEADER_BYTES} bytes");
        let pad = "p".repeat(MAX_HEADER_BYTES);
        let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;
        for block in [
            format!(
                "Content-Length: {}\r\nX-Pad: {pad}\r\nX-More: 1\r\n\r\n",
                body.len()
            ),
            format!("Content-Length: {}\nX-A: 1\nX-Pad: {pad}\n\n", body.len()),
        ] {
            let input = format!("{block}{body}{{\"n\":1}}\n");
            assert_eq!(
                run(1 << 20, input.as_bytes(), 7),
                vec![
                    Event::BadHeader {
                        reason: reason.clone(),
                        prefix: body.as_bytes().to_vec()
                    },
                    msg(Framing::Newline, "{\"n\":1}"),
                ]
            );
            assert_eq!(
                run(1 << 20, input.as_bytes(), 7),
                run(1 << 20, input.as_bytes(), input.len())
            );
        }
        // A line that is not a header ends the block and goes with it, as in a short block.
        let input = format!("Content-Length: 2\r\nX-Pad: {pad}\r\n{{}}\r\n{{\"n\":1}}\n");
        assert_eq!(
            run(1 << 20, input.as_bytes(), 7),
            vec![
                Event::BadHeader {
                    reason,
                    prefix: Vec::new()
                },
                msg(Framing::Newline, "{\"n\":1}"),
            ]
        );
    }

    #[test]
    fn eof_cases() {
        assert_eq!(run(100, b"  \n", 1), vec![]);
        assert_eq!(
            run(100, b"{\"a\":", 2),
            vec![msg(Framing::Newline, "{\"a\":")]
        );
        assert_eq!(
            run(100, b"Content-Length: 10\r\n", 2),
            vec![Event::Truncated {
                received: None,
                expected: None,
                prefix: Vec::new()
            }]
        );
        assert_eq!(
            run(100, b"Content-Length: 10\r\n\r\n{\"id\"", 2),
            vec![Event::Truncated {
                received: Some(5),
                expected: Some(10),
                prefix: b"{\"id\"".to_vec()
            }]
        );
        // Refused when its header block ends, and the part of its body read before the end too.
        assert!(matches!(
            run(4, b"Content-Length: 10\r\n\r\n{\"id\"", 2)[..],
            [
                Event::Oversized { size: 10, .. },
                Event::Oversized { size: 10, .. }
            ]
        ));
        assert!(matches!(
            run(4, b"{\"id\":1234", 2)[..],
            [Event::Oversized { size: 10, .. }]
        ));
    }

    #[test]
    fn json_scan_handles_strings_and_nesting() {
        let mut scan = JsonScan::default();
        assert_eq!(scan.feed(br#"{"a":["}",{"b":"\\"}]"#), None);
        assert_eq!(scan.feed(b"}rest"), Some(1));
    }
}
