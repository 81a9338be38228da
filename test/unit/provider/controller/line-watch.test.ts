import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import { createCA } from '../../../../certs/create-ca.js';
import { createClientCert } from '../../../../certs/create-client-cert.js';
import { createServingCert } from '../../../../certs/create-serving-cert.js';
import { reuseConnections } from '../../../../provider/clusters/connection-reuse.js';
import { LineSplitter, LineWatch, WatchStatusError } from '../../../../provider/controller/line-watch.js';
import { startMutualTlsServer, type MutualTlsServer } from '../../../support/mutual-tls.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap (bytes) still held after a full collection by what `make` returns. */
function heldBy(make: () => unknown): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = make();
  gc();
  const bytes = process.memoryUsage().heapUsed - before;
  expect(kept).to.not.equal(undefined); // keeps `kept` alive through the reading
  return bytes;
}

describe('LineSplitter', () => {
  const split = (chunks: Buffer[], max = 1024) => {
    const lines: string[] = [];
    const s = new LineSplitter(max, (l) => lines.push(l.toString('utf8')));
    const taken = chunks.map((c) => s.push(c));
    return { lines, taken };
  };

  it('hands on each line once whole, across chunks and several to a chunk, skipping empty ones', () => {
    const { lines, taken } = split([Buffer.from('{"a":1}\n{"b"'), Buffer.from(':2}\n\n{"c":3}\n{"d'), Buffer.from('":4}'), Buffer.from('\n')]);
    expect(lines).to.deep.equal(['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']);
    expect(taken.every(Boolean)).to.equal(true);
  });

  it('decodes a character cut between two chunks', () => {
    const bytes = Buffer.from('{"name":"café"}\n');
    const at = bytes.indexOf(0xc3) + 1; // inside the two bytes of é
    expect(split([bytes.subarray(0, at), bytes.subarray(at)]).lines).to.deep.equal(['{"name":"café"}']);
  });

  it('holds an unfinished line sent a byte at a time in memory close to its length', () => {
    // A server that sends one byte per TLS record has each handed on as a Buffer of its own,
    // which costs about a hundred bytes of heap: the bound counts bytes, not what holds them.
    const lines: Buffer[] = [];
    const held = heldBy(() => {
      const s = new LineSplitter(2 * 2 ** 20, (l) => lines.push(l));
      let taken = true;
      for (let i = 0; i < 2 ** 20; i++) taken &&= s.push(Buffer.from('x'));
      expect(taken).to.equal(true);
      return s;
    });
    expect(held).to.be.below(8 * 2 ** 20);
    const s = new LineSplitter(2 ** 20, (l) => lines.push(l));
    for (const c of ['{"a":', '1', '}\n{"b"', ':2}', '\n']) s.push(Buffer.from(c));
    s.push(Buffer.alloc(8 * 1024, 0x20));
    s.push(Buffer.from('{"c":3}\n'));
    expect(lines.map((l) => l.toString().trim())).to.deep.equal(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  it('refuses a line over the bound, finished or not, and takes the lines before it', () => {
    expect(split([Buffer.from('12345\n123456')], 5)).to.deep.equal({ lines: ['12345'], taken: [false] });
    expect(split([Buffer.from('1234'), Buffer.from('56\n')], 5).taken).to.deep.equal([true, false]);
    expect(split([Buffer.from('123'), Buffer.from('45\n')], 5)).to.deep.equal({ lines: ['12345'], taken: [true, true] });
  });
});

describe('LineWatch', () => {
  let server: http.Server;
  let base: string;
  /** What each watch request looked like, and its response, for the test to write. */
  let served: { url: URL; authorization?: string; res: http.ServerResponse; closed: boolean }[];
  let status = 200;
  before(async () => {
    server = http.createServer((req, res) => {
      const w = { url: new URL(req.url!, 'http://x'), authorization: req.headers.authorization, res, closed: false };
      res.on('close', () => (w.closed = true));
      served.push(w);
      if (status !== 200) {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: status, reason: 'Forbidden', message: 'no' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    served = [];
    status = 200;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const kubeConfig = () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: base, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  };
  const until = async (what: string, cond: () => boolean) => {
    for (const end = Date.now() + 2000; !cond(); await new Promise((r) => setTimeout(r, 2))) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
  };
  /** Starts a watch and records what it hands on. */
  const start = async (maxEventBytes?: number, maxEventTokens?: number) => {
    const events: [string, unknown][] = [];
    const ended: unknown[] = [];
    const handle = await new LineWatch(kubeConfig(), { maxEventBytes, maxEventTokens }).watch(
      '/api/v1/pods',
      { resourceVersion: '7', labelSelector: 'a=b', fieldSelector: undefined, allowWatchBookmarks: true },
      (type, obj) => events.push([type, obj]),
      (err) => ended.push(err),
    );
    await until('the request', () => served.length === 1);
    return { handle, events, ended, w: served[0] };
  };

  it('asks for a watch with the query and the credentials, and hands on each event parsed', async () => {
    const { events, ended, w } = await start();
    expect(Object.fromEntries(w!.url.searchParams)).to.deep.equal({ watch: 'true', resourceVersion: '7', labelSelector: 'a=b', allowWatchBookmarks: 'true' });
    expect(w!.authorization).to.equal('Bearer secret-token');
    const modified = JSON.stringify({ type: 'MODIFIED', object: { metadata: { name: 'p', resourceVersion: '9' } } });
    w!.res.write(JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'p', resourceVersion: '8' } } }) + '\n' + modified.slice(0, 10));
    await new Promise((r) => setTimeout(r, 20));
    w!.res.write(modified.slice(10) + '\nnot json\n' + JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410 } }) + '\n');
    await until('three events', () => events.length === 3);
    expect(events).to.deep.equal([
      ['ADDED', { metadata: { name: 'p', resourceVersion: '8' } }],
      ['MODIFIED', { metadata: { name: 'p', resourceVersion: '9' } }],
      ['ERROR', { kind: 'Status', code: 410 }],
    ]);
    w!.res.end();
    await until('the end', () => ended.length === 1);
    expect(ended).to.deep.equal([null]);
  });

  it('ends with the HTTP status and its Status when the server refuses the watch', async () => {
    status = 403;
    const { ended } = await start();
    await until('the end', () => ended.length === 1);
    expect(ended[0]).to.be.instanceOf(WatchStatusError);
    expect((ended[0] as WatchStatusError).statusCode).to.equal(403);
    expect(JSON.parse((ended[0] as WatchStatusError).body).reason).to.equal('Forbidden');
  });

  it('ends with an error and closes the connection on an event over the bound', async () => {
    const { events, ended, w } = await start(100);
    w!.res.write(JSON.stringify({ type: 'ADDED', object: {} }) + '\n');
    w!.res.write('{"type":"ADDED","object":{"data":"' + 'x'.repeat(200));
    await until('the end', () => ended.length === 1);
    expect(events).to.have.length(1);
    expect(String(ended[0])).to.match(/over 100 bytes/);
    await until('the connection closed', () => w!.closed);
  });

  it('skips a long event that nests deeper or holds more tokens than an object can, before it is parsed', async () => {
    // What JSON.parse builds grows with the tokens, not the bytes: 16 MiB of nested arrays,
    // within the bound on an event's bytes, took 480 MiB of RSS.
    const { events, w } = await start(undefined, 1000);
    const added = (object: unknown) => JSON.stringify({ type: 'ADDED', object }) + '\n';
    const depth = 2 ** 19 + 1;
    w!.res.write(`{"type":"ADDED","object":{"metadata":{"name":"deep"},"x":${'['.repeat(depth)}${']'.repeat(depth)}}}\n`);
    w!.res.write(added({ metadata: { name: 'wide' }, x: Array.from({ length: 2 ** 19 }, () => []) }));
    w!.res.write(added({ metadata: { name: 'p' } }));
    await until('an event', () => events.length > 0);
    expect(events.map(([type, o]) => [type, (o as { metadata: { name: string } }).metadata.name])).to.deep.equal([['ADDED', 'p']]);
  });

  it('ends once, with an AbortError, when aborted, and closes the connection', async () => {
    const { handle, ended, w } = await start();
    handle.abort();
    handle.abort();
    await until('the connection closed', () => w!.closed);
    expect(ended).to.have.length(1);
    expect((ended[0] as Error).name).to.equal('AbortError');
  });

  it('ends with an error when the connection is cut', async () => {
    const { ended, w } = await start();
    w!.res.socket!.destroy();
    await until('the end', () => ended.length === 1);
    expect(ended[0]).to.be.instanceOf(Error);
  });
});

describe('LineWatch over TLS, with the agent of reuseConnections', () => {
  const ca = createCA({ commonName: 'test-ca' });
  const serving = createServingCert({ ca, commonName: 'localhost', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const client = createClientCert({ ca, commonName: 'watcher' });
  let server: MutualTlsServer;
  before(async () => {
    // Mutual TLS: the watch must present the kubeconfig's certificate and verify the server with its CA.
    server = await startMutualTlsServer(ca, serving, (cn) => JSON.stringify({ type: 'ADDED', object: { metadata: { name: cn } } }) + '\n');
  });
  after(() => server.close());

  const watchWith = async (caPem: string) => {
    const b64 = (pem: string) => Buffer.from(pem).toString('base64');
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${server.port}`, caData: b64(caPem), skipTLSVerify: false }],
      users: [{ name: 'u', certData: b64(client.certPem), keyData: b64(client.keyPem) }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    reuseConnections(kc);
    const events: unknown[] = [];
    const ended = await new Promise<unknown>((resolve) => {
      void new LineWatch(kc).watch('/api/v1/pods', {}, (_type, obj) => events.push(obj), resolve);
    });
    return { events, ended };
  };

  it('presents the client certificate and verifies the server, both from the agent', async () => {
    expect(await watchWith(ca.certPem)).to.deep.equal({ events: [{ metadata: { name: 'watcher' } }], ended: null });
    const other = await watchWith(createCA({ commonName: 'other-ca' }).certPem);
    expect(other.events).to.deep.equal([]);
    expect(String(other.ended)).to.match(/certificate/i);
  });
});
