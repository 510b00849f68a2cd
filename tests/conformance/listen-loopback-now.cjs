'use strict';
// Preload for the conformance suite's client scenarios (scripts/conformance-client):
//
//   node --require /abs/path/tests/conformance/listen-loopback-now.cjs conformance/dist/index.js ...
//
// The scenario servers listen on every interface (`listen(0)`), so like every peer they are moved
// to 127.0.0.1 by tests/peers/listen-localhost.cjs. But some read `server.address()` right after
// `listen()` returns, to build their URL; a listen with a host first resolves it asynchronously, so
// they would find no address and fail to start. Here a port listen that listen-localhost would give
// the loopback host is bound at once instead: a TCP handle bound to that address synchronously,
// then listened on through the ordinary `listen(handle)` form, so `address()` answers immediately.
// Any other form (paths, handles, explicit hosts, option objects) goes to listen-localhost as is.

const net = require('net');
const { rewriteArgs, HOST } = require('../peers/listen-localhost.cjs');
const { TCP, constants } = process.binding('tcp_wrap');

const loopbackListen = net.Server.prototype.listen;

if (!loopbackListen.__porticoListenLoopbackNow) {
  const patched = function listen(...args) {
    const rewritten = rewriteArgs(args);
    const [port, host, ...rest] = rewritten;
    const positional = (typeof port === 'number' || typeof port === 'string') && host === HOST;
    if (!positional || net.isIPv4(HOST) === false) {
      return loopbackListen.apply(this, args);
    }
    const handle = new TCP(constants.SERVER);
    if (handle.bind(HOST, Number(port)) !== 0) {
      handle.close();
      return loopbackListen.apply(this, args);
    }
    // rest is [backlog][, callback], exactly what listen(handle, ...) takes after the handle.
    return loopbackListen.call(this, handle, ...rest);
  };
  patched.__porticoListenLoopbackNow = true;
  net.Server.prototype.listen = patched;
}
