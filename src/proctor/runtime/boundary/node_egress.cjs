// Loaded into every Node.js program a sandbox with an egress grant runs (NODE_OPTIONS=--require,
// set by egress_forwarder.py beside HTTP_PROXY). Node's fetch and its http/https clients ignore
// the proxy variables (before Node 24 and NODE_USE_ENV_PROXY), and in the sandbox's network
// namespace a direct connection goes nowhere: this makes them tunnel through the egress proxy
// with HTTP CONNECT, so the egress guard decides every connection as it does for any program.
// It adds a way out only through the proxy; it takes nothing away (a program that opens raw
// sockets still has no network), and it never throws: on any surprise it leaves Node as it was.
'use strict';

(function install() {
  const proxyText = process.env.HTTPS_PROXY || process.env.HTTP_PROXY;
  if (!proxyText) return;
  let proxy;
  try {
    proxy = new URL(proxyText);
  } catch (_) {
    return;
  }
  const net = require('net');
  const tls = require('tls');
  const noProxy = String(process.env.NO_PROXY || process.env.no_proxy || '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);

  function bypass(host) {
    const h = String(host).toLowerCase();
    return noProxy.some((n) => n === '*' || h === n || h.endsWith(n.startsWith('.') ? n : '.' + n));
  }

  // A connection to host:port through the proxy; secure: TLS on top, as the origin's own.
  function tunnel(host, port, secure, tlsOptions, callback) {
    let done = false;
    const finish = (err, socket) => {
      if (done) return;
      done = true;
      callback(err, socket);
    };
    const bare = String(host).replace(/^\[|\]$/g, '');
    const target = bare.includes(':') ? `[${bare}]:${port}` : `${bare}:${port}`;
    const sock = net.connect(Number(proxy.port) || 80, proxy.hostname);
    sock.once('error', (err) => finish(err));
    sock.once('connect', () => {
      sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    });
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 65536) {
          sock.destroy();
          finish(new Error('the egress proxy sent an answer too long'));
        }
        return;
      }
      sock.removeListener('data', onData);
      sock.pause();
      const line = head.subarray(0, end).toString('latin1').split('\r\n')[0];
      if (!/^HTTP\/1\.[01] 200/.test(line)) {
        sock.destroy();
        const err = new Error(`egress refused ${target}: ${line}`);
        err.code = 'EGRESS_REFUSED';
        finish(err);
        return;
      }
      const rest = head.subarray(end + 4);
      if (rest.length) sock.unshift(rest);
      if (!secure) {
        finish(null, sock);
        sock.resume(); // paused above so no byte was lost before the client listened
        return;
      }
      const secured = tls.connect({ ...tlsOptions, socket: sock });
      secured.once('secureConnect', () => finish(null, secured));
      secured.once('error', (err) => finish(err));
    };
    sock.on('data', onData);
  }

  // fetch: undici's global dispatcher, replaced by an Agent of the same class that tunnels
  try {
    const key = Symbol.for('undici.globalDispatcher.1');
    if (typeof fetch === 'function' && globalThis[key] === undefined) {
      // loading fetch sets the default dispatcher; a data: URL reaches no network
      fetch('data:,').catch(() => {});
    }
    const Agent = globalThis[key] && globalThis[key].constructor;
    if (typeof Agent === 'function') {
      const connect = (opts, callback) => {
        const secure = opts.protocol === 'https:';
        const port = Number(opts.port) || (secure ? 443 : 80);
        if (bypass(opts.hostname)) {
          const plain = net.connect(port, opts.hostname);
          plain.once('connect', () => callback(null, plain));
          plain.once('error', (err) => callback(err));
          return;
        }
        const servername = opts.servername || (net.isIP(opts.hostname) ? undefined : opts.hostname);
        tunnel(opts.hostname, port, secure, { servername, ALPNProtocols: ['http/1.1'] }, callback);
      };
      globalThis[key] = new Agent({ connect });
    }
  } catch (_) {
    // leave fetch as it was: it then has no network in the sandbox
  }

  // http and https: their global agents make each connection through the tunnel
  for (const [name, secure] of [['http', false], ['https', true]]) {
    try {
      const agent = require(name).globalAgent;
      const direct = agent.createConnection;
      agent.createConnection = function createConnection(options, callback) {
        const host = options.host || options.hostname || 'localhost';
        if (bypass(host) || typeof callback !== 'function') {
          return direct.call(this, options, callback);
        }
        const port = Number(options.port) || (secure ? 443 : 80);
        const servername = options.servername || (net.isIP(host) ? undefined : host);
        tunnel(host, port, secure, { ...options, servername }, callback);
        return undefined;
      };
    } catch (_) {
      // leave the module's agent as it was
    }
  }
})();
