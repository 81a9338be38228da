import { KubeConfig, type KubernetesListObject, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { FakeClock } from '../../../../provider/core/clock.js';
import { silentLogger } from '../../../../provider/core/logger.js';
import { Informer, type InformerOptions, type WatchStarter } from '../../../../provider/controller/informer.js';
import { StringTable } from '../../../../provider/controller/string-table.js';
import { SubtreeTable } from '../../../../provider/controller/subtree-table.js';
import { sharePodParts } from '../../../../provider/model/shared-pod-parts.js';
import { prng } from '../../../support/prng.js';
import { pod } from '../../../support/pods.js';

/** One watch the informer opened, driven by the test. */
interface FakeWatch {
  query: Record<string, unknown>;
  aborted: boolean;
  send(type: string, obj: unknown): void;
  end(err?: unknown): void;
}

/** A scripted API: list answers from `items`, watches are recorded for the test to drive. */
function fakeApi() {
  const api = {
    items: [] as V1Pod[],
    resourceVersion: '10',
    listError: undefined as Error | undefined,
    /** The clock of the informers {@link recordingInformer} makes over this API. */
    clock: new FakeClock(0),
    /** Report an abort through `done` at once, as LineWatch does, rather than later. */
    syncAbort: false,
    lists: 0,
    watches: [] as FakeWatch[],
    list: async (): Promise<KubernetesListObject<V1Pod>> => {
      api.lists++;
      if (api.listError) throw api.listError;
      return { items: [...api.items], metadata: { resourceVersion: api.resourceVersion } };
    },
    watch: {
      async watch(_path, query, onEvent, done) {
        const w: FakeWatch = {
          query,
          aborted: false,
          send: (type, obj) => onEvent(type, obj),
          end: (err) => done(err ?? null),
        };
        api.watches.push(w);
        return {
          abort() {
            w.aborted = true;
            // As client-node does: an abort reports an error through `done`, later (or at once).
            const report = () => done(Object.assign(new Error('The user aborted a request.'), { name: 'AbortError' }));
            if (api.syncAbort) report();
            else setImmediate(report);
          },
        };
      },
    } as WatchStarter,
  };
  return api;
}

const podAt = (name: string, rv: string): V1Pod => pod({ name, namespace: 'ns', resourceVersion: rv });
const tick = () => new Promise((r) => setImmediate(r));
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await tick();
}

describe('Informer list and watch loop', () => {
  let clock: FakeClock;
  let api: ReturnType<typeof fakeApi>;
  let informer: Informer<V1Pod>;
  let events: string[];

  beforeEach(() => {
    clock = new FakeClock(1_000_000);
    api = fakeApi();
    events = [];
    informer = new Informer<V1Pod>({
      name: 'pods',
      cluster: 'c1',
      kubeConfig: new KubeConfig(),
      path: '/api/v1/pods',
      list: api.list,
      labelSelector: 'a=b',
      logger: silentLogger(),
      clock,
      idleRestartMs: 60_000,
      watch: api.watch,
    });
    for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, (p) => events.push(`${verb} ${p.metadata?.name}`));
  });
  afterEach(() => informer.stop());

  it('lists, then watches from the list version with the selector, bookmarks and a server timeout', async () => {
    api.items = [podAt('a', '5')];
    informer.start();
    expect(informer.hasSynced()).to.equal(false);
    await settle();
    expect(informer.hasSynced()).to.equal(true);
    expect(events).to.deep.equal(['add a']);
    expect(api.watches).to.have.length(1);
    const q = api.watches[0]!.query;
    expect(q).to.include({ resourceVersion: '10', allowWatchBookmarks: true, labelSelector: 'a=b' });
    expect(q.timeoutSeconds).to.be.within(300, 599);
  });

  it('applies watch events to the cache and resumes from the last version when the server ends the watch', async () => {
    informer.start();
    await settle();
    api.watches[0]!.send('ADDED', podAt('a', '11'));
    api.watches[0]!.send('MODIFIED', podAt('a', '12'));
    api.watches[0]!.send('MODIFIED', podAt('a', '12')); // same version: no update
    api.watches[0]!.send('BOOKMARK', { metadata: { resourceVersion: '15' } });
    expect(informer.get('a', 'ns')?.metadata?.resourceVersion).to.equal('12');
    clock.advance(1_000);
    api.watches[0]!.end();
    await settle();
    expect(api.lists).to.equal(1);
    expect(api.watches).to.have.length(2);
    expect(api.watches[1]!.query.resourceVersion).to.equal('15');
    api.watches[1]!.send('DELETED', podAt('a', '16'));
    expect(events).to.deep.equal(['add a', 'update a', 'delete a']);
    expect(informer.list()).to.deep.equal([]);
  });

  it('tells the newest version its cache reflects: the list, then each event and bookmark', async () => {
    expect(informer.lastResourceVersion(), 'before the first list').to.equal('');
    informer.start();
    await settle();
    expect(informer.lastResourceVersion()).to.equal('10');
    api.watches[0]!.send('ADDED', podAt('a', '11'));
    expect(informer.lastResourceVersion()).to.equal('11');
    api.watches[0]!.send('BOOKMARK', { metadata: { resourceVersion: '14' } });
    expect(informer.lastResourceVersion()).to.equal('14');
    api.watches[0]!.send('DELETED', podAt('a', '16'));
    expect(informer.lastResourceVersion()).to.equal('16');
  });

  it('relists on 410 Gone and reports what vanished meanwhile as deleted', async () => {
    api.items = [podAt('a', '5'), podAt('b', '6')];
    informer.start();
    await settle();
    clock.advance(1_000); // a watch open a while: its 410 is an ordinary one
    api.items = [podAt('b', '7')];
    api.watches[0]!.send('ERROR', { kind: 'Status', code: 410, message: 'too old resource version' });
    await settle();
    expect(api.lists).to.equal(2);
    expect(events).to.deep.equal(['add a', 'add b', 'update b', 'delete a']);
    expect(api.watches[0]!.aborted).to.equal(true);
    expect(api.watches).to.have.length(2);
    expect(informer.health()).to.include({ ok: true, lastError: undefined });
  });

  it('backs off, doubling, rather than relisting in a loop when the watch of a list just made is gone within a second', async () => {
    const gone = () => Object.assign(new Error('too old resource version'), { statusCode: 410 });
    informer.start();
    await settle();
    api.watches[0]!.end(gone());
    await settle();
    expect(api.lists, 'no relist at once').to.equal(1);
    expect(informer.health()).to.include({ ok: false, lastError: 'too old resource version' });
    clock.advance(1_200);
    await settle();
    expect(api.lists).to.equal(2);
    // The same answer in the stream: the wait doubles, though the list in between succeeded.
    api.watches[1]!.send('ERROR', { kind: 'Status', code: 410, message: 'too old resource version' });
    await settle();
    clock.advance(1_999);
    await settle();
    expect(api.lists, 'not before 2 s').to.equal(2);
    clock.advance(401);
    await settle();
    expect(api.lists).to.equal(3);
    // A 410 a second after the list is an ordinary one: it relists at once.
    api.watches[2]!.send('ADDED', podAt('a', '11'));
    clock.advance(999);
    api.watches[2]!.end(gone());
    await settle();
    expect(api.lists, 'not 999 ms after the list').to.equal(3);
    clock.advance(2_399);
    await settle();
    expect(api.lists).to.equal(4);
    clock.advance(1_000);
    api.watches[3]!.end(gone());
    await settle();
    expect(api.lists).to.equal(5);
    expect(informer.health().ok).to.equal(true);
  });

  it('backs off when the server ends a watch within a second of its start, even one that sent something (which goes on from it, without a list); one that lasted goes on at once', async () => {
    informer.start();
    await settle();
    api.watches[0]!.end();
    await settle();
    expect(api.watches, 'no watch again at once').to.have.length(1);
    expect(informer.health().lastError).to.match(/ended the watch of \/api\/v1\/pods within a second of its start/);
    clock.advance(1_200);
    await settle();
    expect([api.lists, api.watches.length], 'it brought nothing: a list').to.deep.equal([2, 2]);
    api.watches[1]!.send('BOOKMARK', { metadata: { resourceVersion: '11' } });
    clock.advance(999);
    api.watches[1]!.end();
    await settle();
    expect([api.lists, api.watches.length], 'a bookmark and an end, 999 ms in: no watch again at once').to.deep.equal([2, 2]);
    clock.advance(1_200);
    await settle();
    expect([api.lists, api.watches.length], 'it brought a version: no list').to.deep.equal([2, 3]);
    expect(api.watches[2]!.query.resourceVersion).to.equal('11');
    // An apiserver closing the watch of a watcher that falls behind, mid-burst, again and again:
    // each goes on from where the last stopped, a second later (each brought something, so the
    // backoff starts again), with no list.
    const waits: number[] = [];
    for (let i = 3; i < 6; i++) {
      api.watches[i - 1]!.send('MODIFIED', podAt('a', String(10 + i)));
      api.watches[i - 1]!.end();
      await settle();
      let waited = 0;
      while (api.watches.length === i) {
        clock.advance(100);
        waited += 100;
        await settle();
      }
      waits.push(waited);
      expect(api.watches[i]!.query.resourceVersion).to.equal(String(10 + i));
    }
    expect(api.lists).to.equal(2);
    expect(
      waits.every((w) => w >= 1_000 && w <= 1_300),
      `waits ${waits}`,
    ).to.equal(true);
    expect(informer.list().map((p) => p.metadata!.resourceVersion)).to.deep.equal(['15']);
    clock.advance(1_000);
    api.watches[5]!.end();
    await settle();
    expect([api.lists, api.watches.length], 'one that lasted a second: at once, from where it stopped').to.deep.equal([2, 7]);
    expect(api.watches[6]!.query.resourceVersion).to.equal('15');
    expect(informer.health().ok).to.equal(true);
  });

  it('takes none of its own aborts for a failure, when the watch reports them at once (as LineWatch does)', async () => {
    api.syncAbort = true;
    informer.start();
    await settle();
    // An ordinary 410 (a second after the list): a relist, and nothing failed.
    clock.advance(1_000);
    api.watches[0]!.send('ERROR', { kind: 'Status', code: 410, message: 'too old resource version' });
    await settle();
    expect([api.lists, api.watches.length, api.watches[0]!.aborted]).to.deep.equal([2, 2, true]);
    expect(informer.health()).to.include({ ok: true, lastError: undefined });
    expect(clock.pending(), 'only the idle watchdog').to.equal(1);
    // Another error in the stream is the failure reported, not the abort it leads to.
    api.watches[1]!.send('ERROR', { kind: 'Status', code: 500, message: 'etcdserver: leader changed' });
    await settle();
    expect(api.watches[1]!.aborted).to.equal(true);
    expect(informer.health()).to.include({ ok: false, lastError: 'watch error: etcdserver: leader changed' });
    clock.advance(1_200);
    await settle();
    expect([api.lists, api.watches.length]).to.deep.equal([3, 3]);
  });

  it('backs off after failures, doubling up to 30 s, and resets only once a watch has worked', async () => {
    api.listError = new Error('connection refused');
    informer.start();
    await settle();
    const waits: number[] = [];
    for (let i = 0; i < 7; i++) {
      const before = api.lists;
      let waited = 0;
      while (api.lists === before && waited < 60_000) {
        clock.advance(100);
        waited += 100;
        await settle();
      }
      waits.push(waited);
    }
    // 1, 2, 4, 8, 16, 32->30 s, 30 s, each with up to 20 % jitter.
    const expected = [1, 2, 4, 8, 16, 30, 30].map((s) => s * 1000);
    waits.forEach((w, i) => expect(w, `wait ${i}`).to.be.within(expected[i]!, expected[i]! * 1.2 + 100));
    api.listError = undefined;
    clock.advance(40_000);
    await settle();
    expect(informer.hasSynced()).to.equal(true);
    // A list that succeeds is not enough: its watch failing at once, having sent nothing, waits 30 s again.
    api.watches.at(-1)!.end(new Error('reset by peer'));
    await settle();
    let before = api.lists;
    clock.advance(29_999);
    await settle();
    expect(api.lists).to.equal(before);
    clock.advance(6_100);
    await settle();
    expect(api.lists).to.equal(before + 1);
    // A watch that has sent something (a bookmark) resets it: the next failure waits 1 s.
    api.watches.at(-1)!.send('BOOKMARK', { metadata: { resourceVersion: '20' } });
    api.watches.at(-1)!.end(new Error('reset by peer'));
    await settle();
    before = api.lists;
    clock.advance(1_300);
    await settle();
    expect(api.lists).to.equal(before + 1);
  });

  it('ignores the late callbacks of a watch it aborted itself, so an idle restart does not loop', async () => {
    informer.start();
    await settle();
    // Silence for longer than idleRestartMs: the watch is restarted from the same version.
    clock.advance(60_001);
    await settle();
    expect(api.watches).to.have.length(2);
    expect(api.watches[0]!.aborted).to.equal(true);
    // The aborted watch's error arrived (setImmediate) and changed nothing: no relist, no restart.
    clock.advance(30_000);
    await settle();
    expect(api.lists).to.equal(1);
    expect(api.watches).to.have.length(2);
    expect(api.watches[1]!.aborted).to.equal(false);
    expect(informer.health().ok).to.equal(true);
  });

  it('stops for good: no watch survives stop() and no callback acts after it', async () => {
    informer.start();
    await settle();
    informer.stop();
    api.watches[0]!.send('ADDED', podAt('late', '20'));
    await settle();
    clock.advance(10 * 60_000);
    await settle();
    expect(api.watches[0]!.aborted).to.equal(true);
    expect(api.watches).to.have.length(1);
    expect(events).to.deep.equal([]);
    expect(clock.pending()).to.equal(0);
  });

  it('survives a handler that throws', async () => {
    informer.on('add', () => {
      throw new Error('bug in a handler');
    });
    api.items = [podAt('a', '1'), podAt('b', '2')];
    informer.start();
    await settle();
    expect(events).to.deep.equal(['add a', 'add b']);
  });
});

/**
 * An informer over `api` with the given `transform`, `keep`, `indexers`, `strings` or `share`, telling `record` every object it
 * hands out and by which event.
 */
function recordingInformer(
  api: ReturnType<typeof fakeApi>,
  record: (verb: 'add' | 'update' | 'delete', p: V1Pod) => void,
  filters: Pick<InformerOptions<V1Pod>, 'transform' | 'keep' | 'indexers' | 'strings' | 'share'>,
  path = '/api/v1/pods',
): Informer<V1Pod> {
  const informer = new Informer<V1Pod>({
    name: 'pods',
    cluster: 'c1',
    kubeConfig: new KubeConfig(),
    path,
    list: api.list,
    watch: api.watch,
    logger: silentLogger(),
    clock: api.clock,
    ...filters,
  });
  for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, (p) => record(verb, p));
  return informer;
}

/** An informer over `api` with `transform`, recording in `seen` every object it hands out. */
const transformingInformer = (api: ReturnType<typeof fakeApi>, seen: V1Pod[], transform: (p: V1Pod) => V1Pod): Informer<V1Pod> => recordingInformer(api, (_verb, p) => seen.push(p), { transform });

describe('Informer transform', () => {
  it('caches and hands out only what the transform keeps, from the list and from the watch', async () => {
    const api = fakeApi();
    api.items = [{ ...podAt('a', '1'), spec: { containers: [{ name: 'c', image: 'big' }] } }];
    const seen: V1Pod[] = [];
    const informer = transformingInformer(api, seen, (p) => ({ metadata: { name: p.metadata?.name, namespace: p.metadata?.namespace, resourceVersion: p.metadata?.resourceVersion } }));
    informer.start();
    await settle();
    api.watches[0]!.send('MODIFIED', { ...podAt('a', '2'), spec: { containers: [] } });
    api.watches[0]!.send('DELETED', { ...podAt('a', '3'), spec: { containers: [] } });
    api.watches[0]!.send('ADDED', { ...podAt('b', '4'), spec: { containers: [] } });
    expect(informer.get('b', 'ns')).to.deep.equal(podAt('b', '4'));
    expect(seen.map((p) => [p.metadata?.name, p.metadata?.resourceVersion, 'spec' in p])).to.deep.equal([
      ['a', '1', false],
      ['a', '2', false],
      ['a', '2', false],
      ['b', '4', false],
    ]);
    informer.stop();
  });
});

describe('Informer managedFields', () => {
  it('caches and hands out objects without managedFields, before the transform sees them', async () => {
    const api = fakeApi();
    const fields = [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }];
    api.items = [{ metadata: { ...podAt('a', '1').metadata, managedFields: fields } }];
    const seen: V1Pod[] = [];
    const transformed: V1Pod[] = [];
    const informer = transformingInformer(api, seen, (p) => {
      transformed.push(structuredClone(p));
      return p;
    });
    informer.start();
    await settle();
    api.watches[0]!.send('MODIFIED', { metadata: { ...podAt('a', '2').metadata, managedFields: fields } });
    api.watches[0]!.send('ADDED', { metadata: { ...podAt('b', '3').metadata, managedFields: fields } });
    // Not cached before: the deleted object itself is handed out.
    api.watches[0]!.send('DELETED', { metadata: { ...podAt('c', '4').metadata, managedFields: fields } });
    expect(informer.get('a', 'ns')).to.deep.equal(podAt('a', '2'));
    expect(informer.list().map((p) => p.metadata?.managedFields)).to.deep.equal([undefined, undefined]);
    expect(seen.map((p) => [p.metadata?.name, p.metadata?.managedFields])).to.deep.equal([
      ['a', undefined],
      ['a', undefined],
      ['b', undefined],
      ['c', undefined],
    ]);
    expect(transformed.every((p) => p.metadata?.managedFields === undefined)).to.equal(true);
    informer.stop();
  });
});

describe('Informer keep', () => {
  it('caches only what keep accepts; one it refuses later leaves with a delete event, from the watch and on a relist', async () => {
    const api = fakeApi();
    const kept = (p: V1Pod) => p.metadata?.labels?.ours === 'yes';
    const labelled = (name: string, rv: string, ours: string): V1Pod => ({ metadata: { ...podAt(name, rv).metadata, labels: { ours } } });
    api.items = [labelled('a', '1', 'yes'), labelled('b', '2', 'no')];
    const events: string[] = [];
    const informer = recordingInformer(api, (verb, p) => events.push(`${verb} ${p.metadata?.name}`), { keep: kept });
    informer.start();
    await settle();
    expect(informer.list().map((p) => p.metadata?.name)).to.deep.equal(['a']);

    api.watches[0]!.send('ADDED', labelled('c', '3', 'no'));
    api.watches[0]!.send('MODIFIED', labelled('b', '4', 'yes')); // now accepted: added
    api.watches[0]!.send('MODIFIED', labelled('a', '5', 'no')); // now refused: deleted
    api.watches[0]!.send('DELETED', labelled('c', '6', 'no')); // never cached, refused: no event
    api.watches[0]!.send('DELETED', labelled('d', '7', 'yes')); // never cached, accepted: handed out
    expect(informer.list().map((p) => p.metadata?.name)).to.deep.equal(['b']);
    expect(informer.get('a', 'ns')).to.equal(undefined);
    expect(events).to.deep.equal(['add a', 'add b', 'delete a', 'delete d']);

    // A relist whose version of b is refused drops it; refused objects still move the version on.
    api.items = [labelled('b', '8', 'no')];
    api.resourceVersion = '8';
    api.clock.advance(1_000);
    api.watches[0]!.end(Object.assign(new Error('gone'), { statusCode: 410 }));
    await settle();
    expect(informer.list()).to.deep.equal([]);
    expect(events.slice(4)).to.deep.equal(['delete b']);
    expect(api.watches.at(-1)!.query.resourceVersion).to.equal('8');
    informer.stop();
  });
});

describe('Informer of one namespace', () => {
  it('takes nothing of another namespace that its server sends, from the list or the watch, and still moves the version on', async () => {
    // A namespaced Target's server is whoever wrote its kubeconfig: its answers may name any namespace.
    const api = fakeApi();
    const inNs = (name: string, namespace: string, rv: string): V1Pod => ({ metadata: { name, namespace, resourceVersion: rv } });
    api.items = [inNs('a', 'ns', '1'), inNs('b', 'victim', '2')];
    const events: string[] = [];
    const informer = recordingInformer(api, (verb, p) => events.push(`${verb} ${p.metadata?.namespace}/${p.metadata?.name}`), {}, '/api/v1/namespaces/ns/pods');
    informer.start();
    await settle();
    api.watches[0]!.send('ADDED', inNs('c', 'kube-system', '3'));
    api.watches[0]!.send('MODIFIED', inNs('a', 'ns', '4'));
    api.watches[0]!.send('DELETED', inNs('d', 'victim', '5'));
    expect(informer.list().map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).to.deep.equal(['ns/a']);
    expect(informer.get('b', 'victim')).to.equal(undefined);
    expect(events).to.deep.equal(['add ns/a', 'update ns/a']);
    api.clock.advance(1_000);
    api.watches[0]!.end();
    await settle();
    expect(api.watches.at(-1)!.query.resourceVersion).to.equal('5');
    informer.stop();

    // A path of every namespace takes every namespace.
    const all = fakeApi();
    all.items = [inNs('a', 'ns', '1'), inNs('b', 'victim', '2')];
    const everywhere = recordingInformer(all, () => {}, {});
    everywhere.start();
    await settle();
    expect(everywhere.list()).to.have.length(2);
    everywhere.stop();
  });
});

describe('Informer strings', () => {
  it('shares the string values of what it caches, from the list and the watch, and not of what keep refuses', async () => {
    const api = fakeApi();
    const strings = new StringTable();
    const labelled = (name: string, rv: string, app: string): V1Pod => ({ metadata: { name, namespace: 'ns', resourceVersion: rv, labels: { app } } });
    const informer = recordingInformer(api, () => undefined, { keep: (p) => p.metadata?.labels?.app !== 'refused', strings });
    api.items = [labelled('a', '1', 'web')];
    informer.start();
    await settle();
    // a, ns, web (not the resourceVersion).
    expect(strings.size()).to.equal(3);
    api.watches[0]!.send('ADDED', labelled('b', '2', 'web'));
    expect(strings.size()).to.equal(4);
    api.watches[0]!.send('ADDED', labelled('c', '3', 'refused'));
    expect(strings.size()).to.equal(4);
    expect(informer.get('b', 'ns')).to.deep.equal(labelled('b', '2', 'web'));
    informer.stop();
  });
});

describe('Informer share', () => {
  it('gives what it caches, from the list and the watch, the parts cached before, and takes nothing of what keep refuses', async () => {
    const api = fakeApi();
    const table = new SubtreeTable();
    const strings = new StringTable();
    const tolerated = (name: string, rv: string, key: string): V1Pod => ({
      metadata: { name, namespace: 'ns', resourceVersion: rv },
      spec: { containers: [{ name: 'c' }], tolerations: [{ key, operator: 'Exists' }] },
    });
    const informer = recordingInformer(api, () => undefined, { keep: (p) => p.spec?.tolerations?.[0]?.key !== 'refused', strings, share: { table, parts: sharePodParts } });
    api.items = [tolerated('a', '1', 'gpu')];
    informer.start();
    await settle();
    api.watches[0]!.send('ADDED', tolerated('b', '2', 'gpu'));
    api.watches[0]!.send('ADDED', tolerated('c', '3', 'refused'));
    expect(informer.get('b', 'ns')!.spec!.tolerations).to.equal(informer.get('a', 'ns')!.spec!.tolerations);
    expect(Object.isFrozen(informer.get('a', 'ns')!.spec!.tolerations)).to.equal(true);
    expect(informer.get('b', 'ns')).to.deep.equal(tolerated('b', '2', 'gpu'));
    expect(table.size()).to.equal(1);
    informer.stop();
  });

  it('hands the sharing the version of the same object cached until now, and nothing with an object new to the cache', async () => {
    const api = fakeApi();
    const podAt = (name: string, rv: string): V1Pod => pod({ name, namespace: 'ns', resourceVersion: rv, spec: { containers: [{ name: 'c' }] } });
    const offered: Array<[string, string | undefined]> = [];
    const informer = recordingInformer(api, () => undefined, {
      share: {
        table: new SubtreeTable(),
        parts: (p, _table, previous) => offered.push([`${p.metadata!.name}@${p.metadata!.resourceVersion}`, previous && `${previous.metadata!.name}@${previous.metadata!.resourceVersion}`]),
      },
    });
    api.items = [podAt('a', '1')];
    informer.start();
    await settle();
    const cachedA = informer.get('a', 'ns');
    api.watches[0]!.send('MODIFIED', podAt('a', '2'));
    api.watches[0]!.send('ADDED', podAt('b', '3'));
    api.watches[0]!.send('DELETED', podAt('a', '4'));
    api.watches[0]!.send('ADDED', podAt('a', '5'));
    expect(offered).to.deep.equal([
      ['a@1', undefined],
      ['a@2', 'a@1'],
      ['b@3', undefined],
      ['a@5', undefined],
    ]);
    expect(cachedA).to.not.equal(informer.get('a', 'ns'));
    informer.stop();
  });
});

describe('Informer indexers', () => {
  it('finds by index exactly what a walk of the cache finds, through adds, changes of value, refusals, deletes and relists', async () => {
    const api = fakeApi();
    const app = (name: string, rv: string, value: string | undefined, ns = 'ns'): V1Pod => ({
      metadata: { name, namespace: ns, resourceVersion: rv, labels: value === undefined ? {} : { app: value } },
    });
    const byApp = (p: V1Pod) => (p.metadata?.labels?.app ? [`${p.metadata.namespace}/${p.metadata.labels.app}`] : []);
    const informer = recordingInformer(api, () => undefined, { indexers: { app: byApp }, keep: (p) => p.metadata?.labels?.app !== 'refused' });
    const walk = (value: string) => informer.list().filter((p) => byApp(p).includes(value));
    const names = (pods: V1Pod[]) => pods.map((p) => p.metadata?.name).sort();
    const agrees = (...values: string[]) => {
      for (const v of values) expect(names(informer.byIndex('app', v)), v).to.deep.equal(names(walk(v)));
    };
    api.items = [app('a', '1', 'web'), app('b', '2', 'web'), app('c', '3', 'db'), app('d', '4', undefined), app('e', '5', 'web', 'other')];
    informer.start();
    await settle();
    expect(names(informer.byIndex('app', 'ns/web'))).to.deep.equal(['a', 'b']);
    agrees('ns/web', 'ns/db', 'other/web');

    api.watches[0]!.send('ADDED', app('f', '6', 'db'));
    api.watches[0]!.send('MODIFIED', app('a', '7', 'db')); // moves from web to db
    api.watches[0]!.send('MODIFIED', app('b', '8', 'refused')); // refused: leaves the cache and the index
    api.watches[0]!.send('MODIFIED', app('d', '9', 'web')); // gains a value
    api.watches[0]!.send('DELETED', app('c', '10', 'db'));
    expect(names(informer.byIndex('app', 'ns/web'))).to.deep.equal(['d']);
    expect(names(informer.byIndex('app', 'ns/db'))).to.deep.equal(['a', 'f']);
    expect(informer.byIndex('app', 'ns/refused')).to.deep.equal([]);
    agrees('ns/web', 'ns/db', 'other/web', 'ns/refused');

    // A relist drops what vanished, from the index too.
    api.items = [app('f', '11', 'web')];
    api.resourceVersion = '11';
    api.clock.advance(1_000);
    api.watches[0]!.end(Object.assign(new Error('gone'), { statusCode: 410 }));
    await settle();
    expect(names(informer.byIndex('app', 'ns/web'))).to.deep.equal(['f']);
    agrees('ns/web', 'ns/db', 'other/web');
    expect(() => informer.byIndex('nope', 'x')).to.throw(/no index nope/);
    informer.stop();
  });

  it('agrees with a walk of the cache through a seeded random run of values shared by none, one and many objects', async () => {
    const api = fakeApi();
    const random = prng(14);
    // Each pod names up to two of four values, sometimes the same one twice.
    const values = ['v0', 'v1', 'v2', 'v3'];
    const pick = () => values[Math.floor(random() * values.length)]!;
    const podAt = (name: string, rv: number, tags: string[]): V1Pod => pod({ name, namespace: 'ns', resourceVersion: String(rv), annotations: { tags: tags.join(',') } });
    const byTag = (p: V1Pod) => (p.metadata?.annotations?.tags ? p.metadata.annotations.tags.split(',') : []);
    const informer = recordingInformer(api, () => undefined, { indexers: { tag: byTag } });
    const names = (pods: V1Pod[]) => pods.map((p) => p.metadata?.name).sort();
    informer.start();
    await settle();
    const live = new Set<string>();
    let shared = 0;
    for (let rv = 1; rv <= 2000; rv++) {
      const name = `p${Math.floor(random() * 6)}`;
      if (live.has(name) && random() < 0.3) {
        api.watches[0]!.send('DELETED', podAt(name, rv, []));
        live.delete(name);
      } else {
        const tags = random() < 0.2 ? [] : random() < 0.5 ? [pick()] : [pick(), pick()];
        api.watches[0]!.send(live.has(name) ? 'MODIFIED' : 'ADDED', podAt(name, rv, tags));
        live.add(name);
      }
      for (const v of values) {
        const walked = informer.list().filter((p) => byTag(p).includes(v));
        if (walked.length > 1) shared++;
        expect(names(informer.byIndex('tag', v)), `${v} at ${rv}`).to.deep.equal(names(walked));
      }
    }
    // The run went through values held by several objects, not only by one.
    expect(shared).to.be.above(1000);
    informer.stop();
  });
});
