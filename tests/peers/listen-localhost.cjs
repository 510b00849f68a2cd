'use strict';
// Preload that keeps test servers on loopback.
//
//   node --require /abs/path/tests/peers/listen-localhost.cjs server.js
//   NODE_OPTIONS="--require /abs/path/tests/peers/listen-localhost.cjs" some-node-cli
//
// Patches net.Server.prototype.listen (so http/https/express servers too): a TCP
// listen with no host, or with a wildcard host (0.0.0.0, ::, [::], ::0, empty), is
// forced onto 127.0.0.1 (override with PORTICO_LISTEN_HOST). Explicit hosts such as
// "localhost" or "::1" are left alone, as are Unix-socket paths and handle/fd forms.
//
// Handles: listen(), listen(cb), listen(port), listen(port, cb), listen(port, backlog, cb),
// listen(port, host, ...), listen("3001", ...) (numeric string port, as `PORT` env vars
// give), listen(undefined|null, ...), and listen({port, host, ...}, cb).
//
// Once the socket is bound it writes one line to stderr with the real address, which
// is the reliable readiness signal when the server was asked for port 0:
//   portico-listen-localhost: listening on 127.0.0.1:PORT
// Set PORTICO_LISTEN_QUIET=1 to suppress that line.

const net = require('net');

const HOST = process.env.PORTICO_LISTEN_HOST || '127.0.0.1';
const QUIET = process.env.PORTICO_LISTEN_QUIET === '1';
const WILDCARDS = new Set(['', '0.0.0.0', '::', '[::]', '::0', '0:0:0:0:0:0:0:0', '::ffff:0.0.0.0']);

function isWildcard(host) {
  return host === undefined || host === null || (typeof host === 'string' && WILDCARDS.has(host.trim()));
}

// A value Node treats as a TCP port (number, or numeric string); anything else that
// is a string is a pipe path.
function isPort(v) {
  if (typeof v === 'number') return true;
  if (typeof v === 'string') return v.trim() !== '' && !Number.isNaN(Number(v));
  return false;
}

function rewriteArgs(args) {
  if (args.length === 0) return [0, HOST];
  const a0 = args[0];

  if (typeof a0 === 'function') return [0, HOST, ...args]; // listen(cb)

  if (a0 !== null && typeof a0 === 'object') {
    // listen(handle) / listen({fd}) / listen({path}): not a TCP port bind we control.
    if (a0._handle || a0 instanceof net.Server || a0 instanceof net.Socket) return args;
    if (a0.path !== undefined) return args;
    if (a0.fd !== undefined && a0.port === undefined) return args;
    if (a0.handle !== undefined) return args;
    if (!isWildcard(a0.host)) return args;
    const opts = Object.assign({}, a0, { host: HOST });
    delete opts.ipv6Only; // meaningless on an IPv4 loopback address
    return [opts, ...args.slice(1)];
  }

  if (typeof a0 === 'string' && !isPort(a0)) return args; // listen(path, ...)

  if (a0 === undefined || a0 === null || isPort(a0)) {
    const port = a0 === undefined || a0 === null ? 0 : a0;
    const rest = args.slice(1);
    const a1 = rest[0];
    if (typeof a1 === 'string' || a1 === undefined || a1 === null) {
      // listen(port[, host][, ...]) - args[1] is the host slot.
      if (rest.length === 0) return [port, HOST];
      if (!isWildcard(a1)) return [port, ...rest];
      return [port, HOST, ...rest.slice(1)];
    }
    // listen(port, backlog, cb) or listen(port, cb): insert the host.
    return [port, HOST, ...rest];
  }

  return args;
}

const originalListen = net.Server.prototype.listen;

if (!originalListen.__porticoListenLocalhost) {
  const patched = function listen(...args) {
    const rewritten = rewriteArgs(args);
    if (!QUIET) {
      this.once('listening', () => {
        const addr = this.address();
        if (addr && typeof addr === 'object') {
          const host = addr.family === 'IPv6' || addr.family === 6 ? `[${addr.address}]` : addr.address;
          process.stderr.write(`portico-listen-localhost: listening on ${host}:${addr.port}\n`);
        }
      });
    }
    return originalListen.apply(this, rewritten);
  };
  patched.__porticoListenLocalhost = true;
  net.Server.prototype.listen = patched;
}

module.exports = { rewriteArgs, isWildcard, HOST };
