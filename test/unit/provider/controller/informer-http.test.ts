import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { Informer } from '../../../../provider/controller/informer.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { pod } from '../../../support/pods.js';

/** One watch request the server holds open; the test writes its events. */
interface ServedWatch {
  query: URLSearchParams;
  closed: boolean;
  send(type: string, object: unknown): void;
  end(): void;
  reset(): void;
}

/**
 * A tiny API server on 127.0.0.1 for `/api/v1/pods`: a list answers from `items` (or with
 * `listStatus`), a watch answers `watchStatus` or holds a chunked stream of JSON lines open.
 */
class FakeApiServer {
  items: V1Pod[] = [];
  resourceVersion = '10';
  listStatus = 200;
  watchStatus = 200;
  lists: URLSearchParams[] = [];
  watches: ServedWatch[] = [];
  private readonly server = http.createServer((req, res) => this.serve(req, res));

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url!, 'http://x');
    if (url.pathname !== '/api/v1/pods') {
      res.writeHead(404).end();
      return;
    }
    if (url.searchParams.get('watch') !== 'true') {
      this.lists.push(url.searchParams);
      if (this.listStatus !== 200) {
        res.writeHead(this.listStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', code: this.listStatus, message: 'boom' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: this.resourceVersion }, items: this.items }));
      return;
    }
    if (this.watchStatus !== 200) {
      res.writeHead(this.watchStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', code: this.watchStatus }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    const w: ServedWatch = {
      query: url.searchParams,
      closed: false,
      send: (type, object) => res.write(JSON.stringify({ type, object }) + '\n'),
      end: () => res.end(),
      reset: () => req.socket.destroy(),
    };
    res.on('close', () => (w.closed = true));
    this.watches.push(w);
  }
}

const podAt = (name: string, rv: string): V1Pod => pod({ typed: true, name, namespace: 'ns', resourceVersion: rv });

/** Waits, in real time, for something the HTTP exchange brings about. */
async function until(what: string, cond: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); await new Promise((r) => setTimeout(r, 2))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
  }
}

describe('Informer against a local API server (client-node list, LineWatch)', () => {
  let api: FakeApiServer;
  let clock: FakeClock;
  let informer: Informer<V1Pod>;
  let events: string[];
  let server: string;

  beforeEach(async () => {
    api = new FakeApiServer();
    server = await api.start();
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
      currentContext: 'c',
    });
    const core = kubeConfig.makeApiClient(CoreV1Api);
    clock = new FakeClock(1_000_000);
    events = [];
    informer = new Informer<V1Pod>({
      name: 'pods',
      cluster: 'c1',
      kubeConfig,
      path: '/api/v1/pods',
      list: () => core.listPodForAllNamespaces({ labelSelector: 'app=x' }),
      labelSelector: 'app=x',
      logger: silentLogger(),
      clock,
      idleRestartMs: 60_000,
    });
    for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, (p) => events.push(`${verb} ${p.metadata?.name}@${p.metadata?.resourceVersion}`));
  });
  afterEach(async () => {
    informer.stop();
    await api.stop();
  });

  it('lists, then watches from the list version, and applies the streamed events', async () => {
    api.items = [podAt('a', '5')];
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    expect(informer.hasSynced()).to.equal(true);
    expect(api.lists[0]!.get('labelSelector')).to.equal('app=x');
    const q = api.watches[0]!.query;
    expect(Object.fromEntries(['resourceVersion', 'allowWatchBookmarks', 'labelSelector'].map((k) => [k, q.get(k)]))).to.deep.equal({
      resourceVersion: '10',
      allowWatchBookmarks: 'true',
      labelSelector: 'app=x',
    });
    api.watches[0]!.send('ADDED', podAt('b', '11'));
    api.watches[0]!.send('MODIFIED', podAt('a', '12'));
    api.watches[0]!.send('DELETED', podAt('b', '13'));
    await until('three events', () => events.length === 4);
    expect(events).to.deep.equal(['add a@5', 'add b@11', 'update a@12', 'delete b@11']);
    expect(informer.list().map((p) => p.metadata!.name)).to.deep.equal(['a']);
  });

  it('re-watches from the last version seen (a bookmark) when the server ends the stream, without a relist', async () => {
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    api.watches[0]!.send('ADDED', podAt('a', '11'));
    api.watches[0]!.send('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '20' } });
    await until('the add', () => events.length === 1);
    clock.advance(1_000);
    api.watches[0]!.end();
    await until('a second watch', () => api.watches.length === 2);
    expect(api.watches[1]!.query.get('resourceVersion')).to.equal('20');
    expect(api.lists).to.have.length(1);
  });

  it('relists on 410 Gone, in the stream or as the watch response, and reports what vanished as deleted', async () => {
    api.items = [podAt('a', '5'), podAt('b', '6')];
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    clock.advance(1_000); // a watch open a while: its 410 is an ordinary one
    api.items = [podAt('b', '7')];
    api.resourceVersion = '30';
    api.watches[0]!.send('ERROR', { kind: 'Status', apiVersion: 'v1', code: 410, reason: 'Expired', message: 'too old resource version' });
    await until('a second watch', () => api.watches.length === 2);
    expect(api.lists).to.have.length(2);
    expect(api.watches[1]!.query.get('resourceVersion')).to.equal('30');
    await until('the first watch to close', () => api.watches[0]!.closed);
    expect(events).to.deep.equal(['add a@5', 'add b@6', 'update b@7', 'delete a@5']);
    expect(informer.health(), 'its own abort of the old watch is no failure').to.include({ ok: true, lastError: undefined });

    // The same when the watch request itself answers 410, after a watch the server ended (it lasted a second).
    api.items = [];
    api.resourceVersion = '40';
    api.watchStatus = 410;
    clock.advance(1_000);
    api.watches[1]!.end();
    await until('a third list', () => api.lists.length === 3);
    await until('delete b', () => events.includes('delete b@7'));
    expect(informer.list()).to.deep.equal([]);
    // The watch of that list is gone too: a failure, with its backoff, not a relist in a loop.
    await until('the failure', () => informer.health().lastError !== undefined);
    expect(informer.health().lastError).to.equal('watch answered HTTP 410');
    await new Promise((r) => setTimeout(r, 20));
    expect(api.lists).to.have.length(3);
    api.watchStatus = 200;
    clock.advance(1_200);
    await until('a watch again', () => api.watches.length === 3);
    expect(api.lists).to.have.length(4);
  });

  it('restarts with a relist after the connection is reset, once the backoff has passed', async () => {
    api.items = [podAt('a', '5')];
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    api.items = [];
    api.watches[0]!.reset();
    await until('the failure to show', () => informer.health().lastError !== undefined);
    expect(informer.health().ok).to.equal(false);
    clock.advance(999);
    await new Promise((r) => setTimeout(r, 20));
    expect(api.lists, 'no restart before the 1 s backoff').to.have.length(1);
    clock.advance(201); // 1 s plus at most 20 % jitter
    await until('the relist and a new watch', () => api.watches.length === 2);
    expect(api.lists).to.have.length(2);
    expect(events).to.deep.equal(['add a@5', 'delete a@5']);
    expect(informer.health().ok).to.equal(true);
  });

  it('retries a failing list after the backoff and is not synced until one succeeds', async () => {
    api.listStatus = 500;
    informer.start();
    await until('a failed list', () => informer.health().lastError !== undefined);
    expect(informer.hasSynced()).to.equal(false);
    api.listStatus = 200;
    api.items = [podAt('a', '5')];
    clock.advance(1200);
    await until('the watch', () => api.watches.length === 1);
    expect(informer.hasSynced()).to.equal(true);
    expect(events).to.deep.equal(['add a@5']);
  });

  it('restarts a silent watch after idleRestartMs, closing the old connection; a bookmark counts as activity', async () => {
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    clock.advance(50_000);
    api.watches[0]!.send('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '15' } });
    await new Promise((r) => setTimeout(r, 20));
    clock.advance(50_000);
    await new Promise((r) => setTimeout(r, 20));
    expect(api.watches, 'the bookmark kept the watch alive').to.have.length(1);
    clock.advance(10_001);
    await until('a second watch', () => api.watches.length === 2);
    expect(api.watches[1]!.query.get('resourceVersion')).to.equal('15');
    await until('the old connection to close', () => api.watches[0]!.closed);
    expect(api.lists, 'an idle restart resumes, it does not relist').to.have.length(1);
    // The old watch's late abort changes nothing.
    await new Promise((r) => setTimeout(r, 20));
    expect(api.watches).to.have.length(2);
    expect(informer.health().ok).to.equal(true);
  });

  it('lists and watches again with a field selector that changed, once told; the same selector changes nothing', async () => {
    informer.stop();
    let selector = 'spec.nodeName!=';
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({ clusters: [{ name: 'c', server, skipTLSVerify: true }], users: [{ name: 'u' }], contexts: [{ name: 'c', cluster: 'c', user: 'u' }], currentContext: 'c' });
    const core = kubeConfig.makeApiClient(CoreV1Api);
    informer = new Informer<V1Pod>({
      name: 'pods',
      cluster: 'c1',
      kubeConfig,
      path: '/api/v1/pods',
      list: ({ fieldSelector }) => core.listPodForAllNamespaces({ fieldSelector }),
      fieldSelector: () => selector,
      logger: silentLogger(),
      clock,
    });
    informer.on('delete', (p) => events.push(`delete ${p.metadata?.name}`));
    api.items = [podAt('a', '5'), podAt('b', '6')];
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    expect([api.lists[0]!.get('fieldSelector'), api.watches[0]!.query.get('fieldSelector')]).to.deep.equal(['spec.nodeName!=', 'spec.nodeName!=']);
    informer.reselect();
    await new Promise((r) => setTimeout(r, 20));
    expect(api.lists).to.have.length(1);
    selector = 'spec.nodeName!=,spec.nodeName!=virtual';
    api.items = [podAt('a', '5')];
    informer.reselect();
    await until('a second watch', () => api.watches.length === 2);
    expect([api.lists[1]!.get('fieldSelector'), api.watches[1]!.query.get('fieldSelector')]).to.deep.equal([selector, selector]);
    await until('the old connection to close', () => api.watches[0]!.closed);
    expect(events).to.deep.equal(['delete b']);
    // A watch the server ends goes on with the selector of the last list.
    selector = 'spec.nodeName!=,spec.nodeName!=other';
    clock.advance(1_000);
    api.watches[1]!.end();
    await until('a third watch', () => api.watches.length === 3);
    expect(api.watches[2]!.query.get('fieldSelector')).to.equal('spec.nodeName!=,spec.nodeName!=virtual');
    expect(api.lists).to.have.length(2);
  });

  it('closes its watch on stop() and opens none after', async () => {
    informer.start();
    await until('the watch', () => api.watches.length === 1);
    informer.stop();
    await until('the connection to close', () => api.watches[0]!.closed);
    clock.advance(10 * 60_000);
    await new Promise((r) => setTimeout(r, 20));
    expect(api.watches).to.have.length(1);
    expect(api.lists).to.have.length(1);
    expect(clock.pending()).to.equal(0);
  });
});
