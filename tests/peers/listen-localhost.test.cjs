'use strict';
// Tests for listen-localhost.cjs and check-loopback-only.cjs.
//   node --test tests/peers/listen-localhost.test.cjs
// Uses only Node built-ins (works on Node 20 and 22). Every server here binds to
// loopback; wildcard detection is tested on sample /proc text instead.

const test = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');

const PRELOAD = path.join(__dirname, 'listen-localhost.cjs');
const CHECKER = path.join(__dirname, 'check-loopback-only.cjs');

process.env.PORTICO_LISTEN_QUIET = '1';
const { rewriteArgs } = require(PRELOAD);

function listenWith(args, factory = () => net.createServer()) {
  return new Promise((resolve, reject) => {
    const server = factory();
    server.once('error', reject);
    const cb = () => resolve(server);
    // Put our callback where the form under test expects it (or listen for the event).
    const withCb = args.map((a) => (a === CB ? cb : a));
    if (!args.includes(CB)) server.once('listening', cb);
    server.listen(...withCb);
  });
}
const CB = Symbol('callback');

async function boundAddress(args, factory) {
  const server = await listenWith(args, factory);
  const addr = server.address();
  await new Promise((r) => server.close(r));
  return addr;
}

const forms = [
  ['listen()', []],
  ['listen(cb)', [CB]],
  ['listen(0)', [0]],
  ['listen(0, cb)', [0, CB]],
  ['listen("0", cb) numeric string', ['0', CB]],
  ['listen(0, 511, cb) backlog', [0, 511, CB]],
  ['listen(0, "0.0.0.0", cb)', [0, '0.0.0.0', CB]],
  ['listen(0, "::", cb)', [0, '::', CB]],
  ['listen(0, undefined, cb)', [0, undefined, CB]],
  ['listen(undefined, cb)', [undefined, CB]],
  ['listen(null)', [null]],
  ['listen({port: 0}, cb)', [{ port: 0 }, CB]],
  ['listen({port: 0, host: "0.0.0.0"})', [{ port: 0, host: '0.0.0.0' }]],
  ['listen({port: 0, host: "::", ipv6Only: true})', [{ port: 0, host: '::', ipv6Only: true }]],
];

for (const [name, args] of forms) {
  test(`net ${name} binds 127.0.0.1`, async () => {
    const addr = await boundAddress(args);
    assert.strictEqual(addr.address, '127.0.0.1');
    assert.ok(addr.port > 0);
  });
}

test('http.Server (express-style app.listen(PORT, cb)) binds 127.0.0.1', async () => {
  const addr = await boundAddress(['0', CB], () => http.createServer());
  assert.strictEqual(addr.address, '127.0.0.1');
});

test('explicit loopback hosts are left alone', async () => {
  assert.strictEqual((await boundAddress([0, '127.0.0.2'])).address, '127.0.0.2');
  assert.deepStrictEqual(rewriteArgs([0, 'localhost']), [0, 'localhost']);
  assert.deepStrictEqual(rewriteArgs([{ port: 1, host: '::1' }]), [{ port: 1, host: '::1' }]);
});

test('unix socket paths are left alone', async () => {
  const sock = path.join(os.tmpdir(), `portico-listen-test-${process.pid}.sock`);
  const server = await listenWith([sock]);
  assert.strictEqual(server.address(), sock);
  await new Promise((r) => server.close(r));
  assert.deepStrictEqual(rewriteArgs([{ path: sock }]), [{ path: sock }]);
});

function runChild(code, { preload }) {
  const args = preload ? ['--require', PRELOAD, '-e', code] : ['-e', code];
  const env = Object.assign({}, process.env);
  delete env.PORTICO_LISTEN_QUIET;
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const ready = new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.trim());
    });
    child.once('exit', (c) => reject(new Error(`child exited early: ${c}`)));
  });
  return { child, ready };
}

const CHILD = `require('http').createServer().listen(0, function () {
  console.log(this.address().port); setTimeout(() => process.exit(0), 5000);
});`;

test('child with preload: checker reports loopback only (exit 0) and announce line', async () => {
  const { child, ready } = runChild(CHILD, { preload: true });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  try {
    const port = await ready;
    const r = spawnSync(process.execPath, [CHECKER, String(child.pid)], { encoding: 'utf8' });
    assert.strictEqual(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`127\\.0\\.0\\.1:${port} ok`));
  } finally {
    child.kill();
  }
  assert.match(stderr, /portico-listen-localhost: listening on 127\.0\.0\.1:\d+/);
});

test('checker flags wildcard listeners (parsed from sample /proc/net/tcp{,6} text)', () => {
  const { parseListeners, isLoopback } = require(CHECKER);
  const tcp = [
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 00000000:0BB9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0 100 0 0 10 0',
    '   1: 0100007F:0BBA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0 100 0 0 10 0',
    '   2: 0100007F:0BBB 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3333 1 0 100 0 0 10 0',
  ].join('\n');
  const tcp6 = [
    '  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
    '   0: 00000000000000000000000000000000:0BBC 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 100 0 0 10 0',
    '   1: 00000000000000000000000001000000:0BBD 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0 100 0 0 10 0',
  ].join('\n');
  const m = parseListeners(tcp6, true, parseListeners(tcp, false));
  assert.deepStrictEqual(m.get('1111'), { ip: '0.0.0.0', port: 3001 });
  assert.deepStrictEqual(m.get('2222'), { ip: '127.0.0.1', port: 3002 });
  assert.strictEqual(m.has('3333'), false); // ESTABLISHED, not LISTEN
  assert.deepStrictEqual(m.get('4444'), { ip: '::', port: 3004 });
  assert.deepStrictEqual(m.get('5555'), { ip: '::1', port: 3005 });
  assert.strictEqual(isLoopback('0.0.0.0'), false);
  assert.strictEqual(isLoopback('::'), false);
  assert.strictEqual(isLoopback('127.0.0.1'), true);
  assert.strictEqual(isLoopback('::1'), true);
});

test('checker exit codes: 2 for no listener, 0 with --allow-none', () => {
  const none = spawnSync(process.execPath, [CHECKER, '999999999'], { encoding: 'utf8' });
  assert.strictEqual(none.status, 2, none.stderr);
  const allowed = spawnSync(process.execPath, [CHECKER, '--allow-none', '999999999'], { encoding: 'utf8' });
  assert.strictEqual(allowed.status, 0, allowed.stderr);
});
