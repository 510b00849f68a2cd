#!/usr/bin/env node
'use strict';
// Checks that every listening TCP socket of the given processes (and their
// descendants) is bound to a loopback address. Linux only (reads /proc).
//
//   node tests/peers/check-loopback-only.cjs [--allow-none] [--wait MS] PID [PID...]
//
// Prints one line per listener: "pid=N 127.0.0.1:PORT ok" or "... NOT LOOPBACK".
// Exit codes: 0 all listeners are loopback (and at least one exists, unless
// --allow-none); 1 a listener is on a non-loopback address; 2 no listener found
// (after waiting up to --wait MS for one to appear); 64 bad usage.
// Works with any Node >= 14; uses no packages.

const fs = require('fs');

function descendants(roots) {
  const children = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(name));
    } catch (_) { /* process went away */ }
  }
  const out = new Set();
  const todo = [...roots];
  while (todo.length) {
    const p = todo.pop();
    if (out.has(p)) continue;
    out.add(p);
    for (const c of children.get(p) || []) todo.push(c);
  }
  return [...out];
}

function socketInodes(pid) {
  const inodes = new Set();
  let fds = [];
  try { fds = fs.readdirSync(`/proc/${pid}/fd`); } catch (_) { return inodes; }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch (_) { /* fd closed meanwhile */ }
  }
  return inodes;
}

function decodeAddr(hex, v6) {
  const [ipHex, portHex] = hex.split(':');
  const port = parseInt(portHex, 16);
  if (!v6) {
    const b = Buffer.from(ipHex, 'hex');
    return { ip: `${b[3]}.${b[2]}.${b[1]}.${b[0]}`, port };
  }
  // 4 little-endian 32-bit words
  const words = [];
  for (let i = 0; i < 32; i += 8) {
    const w = Buffer.from(ipHex.slice(i, i + 8), 'hex');
    words.push(Buffer.from([w[3], w[2], w[1], w[0]]));
  }
  const bytes = Buffer.concat(words);
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  let ip = groups.join(':');
  if (bytes.slice(0, 10).every((x) => x === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    ip = `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  } else if (groups.every((g) => g === '0')) {
    ip = '::';
  } else if (groups.slice(0, 7).every((g) => g === '0') && groups[7] === '1') {
    ip = '::1';
  }
  return { ip, port };
}

// Parses /proc/net/tcp{,6} text into Map(inode -> {ip, port}) of LISTEN sockets.
function parseListeners(text, v6, byInode = new Map()) {
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== '0A') continue; // 0A = LISTEN
    byInode.set(f[9], decodeAddr(f[1], v6));
  }
  return byInode;
}

function listeners() {
  const byInode = new Map();
  for (const [file, v6] of [['/proc/net/tcp', false], ['/proc/net/tcp6', true]]) {
    let text = '';
    try { text = fs.readFileSync(file, 'utf8'); } catch (_) { continue; }
    parseListeners(text, v6, byInode);
  }
  return byInode;
}

function isLoopback(ip) {
  return ip.startsWith('127.') || ip === '::1' || ip.startsWith('::ffff:127.');
}

function scan(pids) {
  const table = listeners();
  const found = [];
  for (const pid of descendants(pids)) {
    for (const inode of socketInodes(pid)) {
      const addr = table.get(inode);
      if (addr) found.push({ pid, ...addr });
    }
  }
  return found;
}


function main() {
  function usage(msg) {
    if (msg) process.stderr.write(`check-loopback-only: ${msg}\n`);
    process.stderr.write('usage: check-loopback-only.cjs [--allow-none] [--wait MS] PID [PID...]\n');
    process.exit(64);
  }

  const pids = [];
  let allowNone = false;
  let waitMs = 0;
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--allow-none') allowNone = true;
    else if (a === '--wait') waitMs = Number(argv[++i]);
    else if (/^\d+$/.test(a)) pids.push(Number(a));
    else usage(`unexpected argument ${a}`);
  }
  if (pids.length === 0 || Number.isNaN(waitMs)) usage();

  const deadline = Date.now() + waitMs;
  let found = scan(pids);
  while (found.length === 0 && Date.now() < deadline) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    found = scan(pids);
  }

  let bad = 0;
  for (const l of found) {
    const ok = isLoopback(l.ip);
    if (!ok) bad++;
    const shown = l.ip.includes(':') ? `[${l.ip}]` : l.ip;
    process.stdout.write(`pid=${l.pid} ${shown}:${l.port} ${ok ? 'ok' : 'NOT LOOPBACK'}\n`);
  }
  if (bad) process.exit(1);
  if (found.length === 0 && !allowNone) {
    process.stderr.write(`check-loopback-only: no listening TCP socket found for pid(s) ${pids.join(' ')}\n`);
    process.exit(2);
  }
  process.exit(0);
}

if (require.main === module) main();

module.exports = { decodeAddr, parseListeners, isLoopback, scan };
