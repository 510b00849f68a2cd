// The live event stream (/api/events), shared by every dashboard tab of this origin. A browser keeps
// at most 6 HTTP/1.1 connections per host: with a stream per tab, a 7th tab would never load and a
// request in an open one would wait behind the streams. So one tab, the leader, holds the stream
// (elected by a Web Lock, which passes to another tab when the leader closes) and relays each event
// to the others over a BroadcastChannel. The others call themselves live while the leader's stream
// is open. A new stream (a new leader, or the leader reconnecting) makes every tab re-read what it
// shows, as after a reconnect. Without Web Locks or BroadcastChannel each tab holds its own stream.
//
// The stream is read with fetch (an EventSource cannot send the page key); when it ends or fails
// the leader tries again, ever more slowly, and every tab polls meanwhile.

import { apiError, readEvents, sessionHeaders } from './util.js';

/// Waits before opening the event stream again after it failed for good, growing to the last.
const RETRY_MS = [2000, 5000, 15000, 30000, 60000];
const LOCK = 'portico-events';
const CHANNEL = 'portico-events';
const EVENTS = ['resync', 'server', 'approval', 'audit', 'task'];

/// The live stream for one tab. `onOpen(reconnected)`: a stream is open (`reconnected`: one was
/// open before, so what happened in between must be read again); `onEvent(type, data)`: an event
/// (`resync` included); `onClosed()`: no stream is open now.
export function liveStream({ onOpen, onEvent, onClosed }) {
  const shared = typeof BroadcastChannel === 'function' && typeof navigator.locks?.request === 'function';
  let running = false;
  let leader = false;
  /// Whether a stream is open as far as this tab knows, and which one (its id).
  let open = false;
  let streamId = null;
  let everOpened = false;
  let channel = null;
  let lockRequest = null;
  let releaseLock = null;
  let fetching = null;
  let retries = 0;
  let retryTimer = null;

  const post = (message) => {
    if (channel) channel.postMessage(message);
  };

  function opened(id) {
    if (open && id === streamId) return;
    const reconnected = everOpened;
    everOpened = true;
    open = true;
    streamId = id;
    onOpen(reconnected);
  }

  /// No stream is open (also when none was yet: the page polls until one is).
  function closed() {
    open = false;
    onClosed();
  }

  /// The leader's own stream; its events go to this tab and, relayed, to the others.
  function connect() {
    if (fetching || !running) return;
    const controller = new AbortController();
    fetching = controller;
    (async () => {
      try {
        const response = await fetch('/api/events', {
          credentials: 'same-origin',
          cache: 'no-store',
          headers: { Accept: 'text/event-stream', ...sessionHeaders() },
          signal: controller.signal,
        });
        if (!response.ok) {
          // A 401 shows the login form; any other refusal (too many streams) is retried.
          apiError(response.status, null, 'The live stream');
          return;
        }
        retries = 0;
        const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
        opened(id);
        post({ kind: 'open', stream: id });
        await readEvents(response, (type, data) => {
          if (!EVENTS.includes(type)) return;
          if (type !== 'resync' && !(data && typeof data === 'object')) return;
          onEvent(type, data);
          post({ kind: 'event', type, data });
        });
      } catch {
        // A dropped connection: retried below, unless the stream was closed on purpose.
      } finally {
        if (fetching === controller) fetching = null;
        if (!controller.signal.aborted && running && leader) {
          closed();
          post({ kind: 'closed' });
          retry();
        }
      }
    })();
  }

  function retry() {
    const wait = RETRY_MS[Math.min(retries, RETRY_MS.length - 1)];
    retries += 1;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      connect();
    }, wait);
  }

  function disconnect() {
    if (fetching) fetching.abort();
    fetching = null;
    if (retryTimer !== null) clearTimeout(retryTimer);
    retryTimer = null;
  }

  /// What the leader relays, as a follower hears it.
  function heard({ data: message }) {
    if (!running || !message || typeof message !== 'object') return;
    if (leader) {
      // A tab that just started asks what the stream is doing.
      if (message.kind === 'hello') post(open ? { kind: 'open', stream: streamId } : { kind: 'closed' });
      return;
    }
    if (message.kind === 'open' && typeof message.stream === 'string') opened(message.stream);
    else if (message.kind === 'closed') closed();
    else if (message.kind === 'event' && EVENTS.includes(message.type)) onEvent(message.type, message.data);
  }

  /// The leader is leaving (its tab closes): the others poll until the next leader's stream is open.
  function leaving() {
    if (leader && running) post({ kind: 'closed' });
  }

  return {
    start() {
      if (running) return;
      running = true;
      retries = 0;
      if (!shared) {
        leader = true;
        connect();
        return;
      }
      channel = new BroadcastChannel(CHANNEL);
      channel.onmessage = heard;
      window.addEventListener('pagehide', leaving);
      lockRequest = new AbortController();
      navigator.locks.request(LOCK, { signal: lockRequest.signal }, () => {
        if (!running) return undefined;
        leader = true;
        connect();
        // Held until this tab stops or closes.
        return new Promise((resolve) => {
          releaseLock = resolve;
        });
      }).catch(() => {
        // Stopped while waiting for the lock.
      });
      post({ kind: 'hello' });
    },
    stop() {
      if (!running) return;
      running = false;
      disconnect();
      if (leader && shared) post({ kind: 'closed' });
      leader = false;
      if (lockRequest) lockRequest.abort();
      lockRequest = null;
      if (releaseLock) releaseLock();
      releaseLock = null;
      window.removeEventListener('pagehide', leaving);
      if (channel) channel.close();
      channel = null;
      open = false;
      streamId = null;
      everOpened = false;
    },
  };
}
