import { FetchError, KubeConfig, type KubernetesListObject, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { CacheBudget, estimateHeapBytes } from '../../../../provider/controller/cache-budget.js';
import { Informer, type InformerOptions, type ListQuery, type WatchStarter } from '../../../../provider/controller/informer.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { pod } from '../../../support/pods.js';

/** A server that answers lists in pages (the token is the index of the page's first object) and records watches. */
function pagedApi() {
  const api = {
    items: [] as V1Pod[],
    resourceVersion: '10',
    queries: [] as ListQuery[],
    /** Answers whose page would hold more than this many objects fail as the transport does for an answer over its bound. */
    maxObjectsPerAnswer: Infinity,
    /** Answer every page with no objects and a token (a server that never ends its list). */
    endless: false,
    /** Put the token where lists of custom objects (plain JSON) have it. */
    plainContinue: false,
    watches: [] as { query: Record<string, unknown>; send(type: string, obj: unknown): void; end(err?: unknown): void }[],
    list: async (q: ListQuery): Promise<KubernetesListObject<V1Pod>> => {
      api.queries.push(q);
      if (api.endless) return { items: [], metadata: { resourceVersion: api.resourceVersion, _continue: 'more' } };
      const start = q._continue ? Number(q._continue) : 0;
      const end = Math.min(api.items.length, start + q.limit);
      if (end - start > api.maxObjectsPerAnswer) throw new FetchError('answer of /api/v1/pods larger than 100 bytes', 'max-size');
      const next = end < api.items.length ? String(end) : undefined;
      const metadata = api.plainContinue ? ({ resourceVersion: api.resourceVersion, continue: next } as object) : { resourceVersion: api.resourceVersion, _continue: next };
      return { items: api.items.slice(start, end).map((p) => structuredClone(p)), metadata };
    },
    watch: {
      async watch(_path, query, onEvent, done) {
        api.watches.push({ query, send: (type, obj) => onEvent(type, obj), end: (err) => done(err ?? null) });
        return { abort: () => setImmediate(() => done(Object.assign(new Error('aborted'), { name: 'AbortError' }))) };
      },
    } as WatchStarter,
  };
  return api;
}

const podAt = (name: string, rv = '5', note = ''): V1Pod => pod({ name, namespace: 'ns', resourceVersion: rv, annotations: note ? { note } : undefined });
const pods = (n: number, note = '') => Array.from({ length: n }, (_, i) => podAt(`p${i}`, '5', note));
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/** Informers over one {@link pagedApi}, each test's own, stopped after it. */
function fixture(defaults: Partial<InformerOptions<V1Pod>>) {
  const f = {
    clock: new FakeClock(1_000_000),
    api: pagedApi(),
    informers: [] as Informer<V1Pod>[],
    make(o: Partial<InformerOptions<V1Pod>> = {}) {
      const informer = new Informer<V1Pod>({
        name: 'delegates',
        cluster: 'c2',
        kubeConfig: new KubeConfig(),
        path: '/api/v1/pods',
        list: f.api.list,
        logger: silentLogger(),
        clock: f.clock,
        watch: f.api.watch,
        ...defaults,
        ...o,
      });
      f.informers.push(informer);
      return informer;
    },
  };
  return f;
}

describe('Informer lists in pages', () => {
  let f: ReturnType<typeof fixture>;
  let api: ReturnType<typeof pagedApi>;
  const make = (o: Partial<InformerOptions<V1Pod>> = {}) => f.make(o);

  beforeEach(() => {
    f = fixture({ labelSelector: 'a=b' });
    ({ api } = f);
  });
  afterEach(() => {
    for (const i of f.informers) i.stop();
  });

  it('asks for pages of the page size, each from the token of the one before, and watches from the list', async () => {
    api.items = pods(7);
    const informer = make({ pageSize: 3 });
    informer.start();
    await settle();
    expect(api.queries.map((q) => [q.limit, q._continue])).to.deep.equal([
      [3, undefined],
      [3, '3'],
      [3, '6'],
    ]);
    expect(api.queries.every((q) => q.labelSelector === 'a=b')).to.equal(true);
    expect(informer.list().map((p) => p.metadata?.name)).to.have.members(api.items.map((p) => p.metadata?.name));
    expect(informer.hasSynced()).to.equal(true);
    expect(api.watches[0]!.query.resourceVersion).to.equal('10');
  });

  it('asks 500 objects a page by default', async () => {
    make().start();
    await settle();
    expect(api.queries[0]!.limit).to.equal(500);
  });

  it('takes the token where lists of custom objects carry it', async () => {
    api.items = pods(5);
    api.plainContinue = true;
    const informer = make({ pageSize: 2 });
    informer.start();
    await settle();
    expect(api.queries.map((q) => q._continue)).to.deep.equal([undefined, '2', '4']);
    expect(informer.list()).to.have.length(5);
  });

  it('asks for a quarter of a page that was over the answer bound, then grows back to the page size', async () => {
    api.items = pods(40);
    api.maxObjectsPerAnswer = 4;
    const informer = make({ pageSize: 16 });
    informer.start();
    await settle();
    // 16 refused, 4 taken, 8 refused, 2... : each refusal asks again from the same token.
    const asked = api.queries.map((q) => [q.limit, q._continue ?? '0']);
    expect(asked.slice(0, 4)).to.deep.equal([
      [16, '0'],
      [4, '0'],
      [8, '4'],
      [2, '4'],
    ]);
    expect(informer.list()).to.have.length(40);
    expect(informer.hasSynced()).to.equal(true);
  });

  it('fails a list whose page goes on with no objects, rather than asking forever', async () => {
    api.endless = true;
    const informer = make({ pageSize: 2 });
    informer.start();
    await settle();
    expect(api.queries).to.have.length(1);
    expect(informer.hasSynced()).to.equal(false);
    expect(informer.health().lastError).to.match(/a page of \/api\/v1\/pods with no objects and a continue token/);
  });

  it('keeps what the cache would keep of each page, transforming each object once', async () => {
    api.items = [...pods(3), { metadata: { name: 'elsewhere', namespace: 'other', resourceVersion: '5' } }];
    let transforms = 0;
    const informer = make({
      path: '/api/v1/namespaces/ns/pods',
      pageSize: 2,
      transform: (p) => {
        transforms++;
        return { metadata: { ...p.metadata, annotations: undefined } };
      },
      keep: (p) => p.metadata?.name !== 'p1',
    });
    informer.start();
    await settle();
    expect(informer.list().map((p) => p.metadata?.name)).to.have.members(['p0', 'p2']);
    expect(transforms).to.equal(3);
  });
});

describe('Informer within a cache budget', () => {
  let f: ReturnType<typeof fixture>;
  let clock: FakeClock;
  let api: ReturnType<typeof pagedApi>;
  const make = (budget: CacheBudget, o: Partial<InformerOptions<V1Pod>> = {}) => f.make({ budget, ...o });
  const sizeOf = (p: V1Pod) => estimateHeapBytes(p);

  beforeEach(() => {
    f = fixture({ pageSize: 10 });
    ({ clock, api } = f);
  });
  afterEach(() => {
    for (const i of f.informers) i.stop();
  });

  it('counts what its cache holds, and what it lets go', async () => {
    api.items = pods(3);
    const budget = new CacheBudget(1e9);
    const informer = make(budget);
    const events: string[] = [];
    informer.on('add', (p) => events.push(`add ${p.metadata?.name}`));
    informer.start();
    await settle();
    expect(budget.usedBytes).to.equal(3 * sizeOf(podAt('p0')));
    api.watches[0]!.send('MODIFIED', podAt('p0', '6', 'x'.repeat(1000)));
    expect(budget.usedBytes).to.equal(2 * sizeOf(podAt('p0')) + sizeOf(podAt('p0', '6', 'x'.repeat(1000))));
    api.watches[0]!.send('DELETED', podAt('p1', '7'));
    expect(budget.usedBytes).to.equal(sizeOf(podAt('p0')) + sizeOf(podAt('p0', '6', 'x'.repeat(1000))));
    informer.stop();
    expect(budget.usedBytes, 'a stopped informer counts itself out').to.equal(0);
    expect(events).to.deep.equal(['add p0', 'add p1', 'add p2']);
  });

  it('refuses a list that would pass the budget with what the others hold, keeping its cache; a list that fits clears the refusal', async () => {
    const budget = new CacheBudget(30 * sizeOf(podAt('p00')));
    const other = make(budget, { name: 'configmap-copies', list: async () => ({ items: pods(10), metadata: { resourceVersion: '3' } }) });
    other.start();
    await settle();
    api.items = pods(15);
    const informer = make(budget);
    informer.start();
    await settle();
    expect(informer.list()).to.have.length(15);
    expect(budget.refusal()).to.equal(undefined);

    // 25 objects more than the 15: with the other's 10, over the budget.
    api.items = pods(40);
    clock.advance(2_000);
    api.watches.at(-1)!.send('ERROR', { code: 410, message: 'too old' });
    await settle();
    expect(informer.list(), 'the cache keeps what it had').to.have.length(15);
    expect(budget.refusal()).to.match(/cache budget of \d+ MiB \(--target-cache-budget-mib\), listing \/api\/v1\/pods .*informer delegates stopped taking them/);
    expect(informer.health().ok).to.equal(false);
    // The list stopped at the page that passed the budget: its third (30 objects fit, with the other's 10).
    expect(api.queries.at(-1)?._continue).to.equal('20');

    api.items = pods(20);
    clock.advance(2_000);
    await settle();
    expect(informer.list()).to.have.length(20);
    expect(budget.refusal()).to.equal(undefined);
    expect(budget.usedBytes).to.be.at.most(budget.limitBytes);
  });

  it('does not take an object a watch sends that would pass the budget, and lists again after its backoff', async () => {
    api.items = pods(2);
    const budget = new CacheBudget(2 * sizeOf(podAt('p0')) + 500);
    const informer = make(budget);
    const added: string[] = [];
    informer.on('add', (p) => added.push(p.metadata?.name ?? ''));
    informer.start();
    await settle();
    const lists = api.queries.length;
    api.watches[0]!.send('ADDED', podAt('big', '11', 'x'.repeat(1000)));
    expect(informer.get('big', 'ns')).to.equal(undefined);
    expect(added).to.deep.equal(['p0', 'p1']);
    expect(budget.refusal()).to.match(/at ns\/big; informer delegates stopped taking them/);
    expect(budget.usedBytes).to.equal(2 * sizeOf(podAt('p0')));
    // The list after the backoff (the big one was never in it) fits.
    clock.advance(2_000);
    await settle();
    expect(api.queries.length).to.equal(lists + 1);
    expect(budget.refusal()).to.equal(undefined);
  });

  it('a refusal stands while the list still does not fit', async () => {
    const budget = new CacheBudget(5 * sizeOf(podAt('p0')));
    api.items = pods(8);
    const informer = make(budget);
    informer.start();
    await settle();
    expect(informer.hasSynced()).to.equal(false);
    expect(informer.list()).to.have.length(0);
    expect(budget.usedBytes).to.equal(0);
    expect(budget.refusal()).to.match(/listing/);
    clock.advance(2_000);
    await settle();
    expect(budget.refusal()).to.match(/listing/);
  });
});

describe('estimateHeapBytes', () => {
  it('counts a string by its length, members by their names, and items', () => {
    const short = estimateHeapBytes({ a: 'x' });
    expect(estimateHeapBytes({ a: 'x'.repeat(1001) }) - short).to.equal(1000);
    expect(estimateHeapBytes({ abcd: 'x' }) - short).to.equal(3);
    expect(estimateHeapBytes([1, 2, 3]) - estimateHeapBytes([1, 2])).to.equal(16);
  });

  it('walks a value nested deeper than the stack would allow', () => {
    let deep: unknown = [];
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(estimateHeapBytes(deep)).to.be.greaterThan(200_000 * 48);
  });

  it('is not below what V8 takes for the costliest shapes it was set by (within a factor of two)', function () {
    // Many small objects with member names of their own: a new hidden class each.
    const text = JSON.stringify(Array.from({ length: 2000 }, (_, k) => ({ [`u_${k}`]: '' })));
    expect(estimateHeapBytes(JSON.parse(text))).to.be.greaterThan(2000 * 100);
  });
});
