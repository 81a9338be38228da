import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import { summaryCounts } from '../../../provider/model/counted.js';
import { isTerminal } from '../../../provider/model/resources.js';
import { PlacementMemory, type SummaryRead } from '../../../scheduler/placement-memory.js';
import { prng } from '../../support/prng.js';

describe('scheduler: PlacementMemory', () => {
  it('keeps a refusal for its time, per pod and target, doubling it for each refusal in a row', () => {
    const m = new PlacementMemory({ refusalTtlMs: 1000, maxRefusalTtlMs: 3000 });
    m.refuse('u1', 'ClusterTarget/c2', 'c2: full', 0);
    expect(m.refusal('u1', 'ClusterTarget/c2', 999)).to.deep.include({ reason: 'c2: full', atMs: 0, forMs: 1000 });
    expect(m.refusal('u1', 'ClusterTarget/c1', 10)).to.equal(undefined);
    expect(m.refusal('u2', 'ClusterTarget/c2', 10)).to.equal(undefined);
    expect(m.refusal(undefined, 'ClusterTarget/c2', 10)).to.equal(undefined);
    expect(m.refusal('u1', 'ClusterTarget/c2', 1000)).to.equal(undefined);
    m.refuse('u1', 'ClusterTarget/c2', 'c2: still full', 1000);
    expect(m.refusal('u1', 'ClusterTarget/c2', 2999)).to.deep.include({ reason: 'c2: still full', forMs: 2000, count: 2 });
    m.refuse('u1', 'ClusterTarget/c2', 'c2: still full', 3000);
    expect(m.refusal('u1', 'ClusterTarget/c2', 3000)!.forMs).to.equal(3000);
  });

  it('forgets a pod, and the oldest pods beyond its bound', () => {
    const m = new PlacementMemory({ maxPods: 2 });
    m.refuse('u1', 't', 'r', 0);
    m.refuse('u2', 't', 'r', 0);
    m.refuse('u1', 't2', 'r', 1); // u1 is now the newest
    m.refuse('u3', 't', 'r', 2);
    expect(m.refusal('u2', 't', 3)).to.equal(undefined);
    expect(m.refusal('u1', 't2', 3)).to.not.equal(undefined);
    m.forget('u1');
    expect(m.refusal('u1', 't2', 3)).to.equal(undefined);
  });

  it('sums assumptions per node until a summary read late enough covers them, when the summary does not say its pod version', () => {
    const m = new PlacementMemory({ summaryLagMs: 1000 });
    m.assume('t', 'n1', new Map([['cpu', 1n]]), 100);
    m.assume(
      't',
      'n1',
      new Map([
        ['cpu', 2n],
        ['pods', 1n],
      ]),
      600,
    );
    m.assume('t', 'n2', new Map([['cpu', 5n]]), 600);
    expect(m.assumedOn('t', { readAtMs: 1000 })).to.deep.equal(
      new Map([
        [
          'n1',
          new Map([
            ['cpu', 3n],
            ['pods', 1n],
          ]),
        ],
        ['n2', new Map([['cpu', 5n]])],
      ]),
    );
    // A summary read at 1200 covers the delegate placed at 100, not those of 600.
    expect(m.assumedOn('t', { readAtMs: 1200 }).get('n1')).to.deep.equal(
      new Map([
        ['cpu', 2n],
        ['pods', 1n],
      ]),
    );
    expect(m.assumedOn('t', { readAtMs: 5000 }).size).to.equal(0);
    expect(m.assumedOn('other', { readAtMs: 0 }).size).to.equal(0);
  });

  describe('with a summary that says which pod version it counts', () => {
    const delegate = (name: string, rv: string, nodeName?: string, phase = 'Running') => ({
      metadata: { namespace: 'ns', name, resourceVersion: rv },
      spec: { nodeName, containers: [] },
      status: { phase },
    });
    const cache =
      (...pods: ReturnType<typeof delegate>[]) =>
      (namespace: string, name: string) =>
        pods.find((p) => p.metadata.namespace === namespace && p.metadata.name === name);
    const cpu = (n: bigint) => new Map([['cpu', n]]);

    it('keeps an assumption, however late the summary is read, until that summary has reached the version its delegate was bound at', () => {
      // The burst case: a summary read 2 s after the placement counts the delegate already; a
      // time rule would take its room twice until a summary read 3 s after, and a quiet target
      // writes none.
      const m = new PlacementMemory({ summaryLagMs: 3000 });
      m.assume('t', 'n1', cpu(10n), 0, { namespace: 'ns', name: 'd1' });
      m.assume('t', 'n1', cpu(20n), 0, { namespace: 'ns', name: 'd2' });
      const both = cache(delegate('d1', '100', 'n1'), delegate('d2', '105', 'n1'));
      expect(m.assumedOn('t', { readAtMs: 2000, podsResourceVersion: '99' }, both).get('n1')).to.deep.equal(cpu(30n));
      expect(m.assumedOn('t', { readAtMs: 2000, podsResourceVersion: '100' }, both).get('n1')).to.deep.equal(cpu(20n));
      // Read long after the placement, a summary that has not reached d2 still does not count it.
      expect(m.assumedOn('t', { readAtMs: 50_000, podsResourceVersion: '104' }, both).get('n1')).to.deep.equal(cpu(20n));
      // Versions compare as numbers, not as strings.
      expect(m.assumedOn('t', { readAtMs: 50_000, podsResourceVersion: '1000' }, both).size).to.equal(0);
    });

    it('moves an assumption to the node the target scheduler chose, keeps it while the delegate is not in the cache yet, and drops it once the delegate is finished', () => {
      const m = new PlacementMemory();
      m.assume('t', 'n1', cpu(10n), 0, { namespace: 'ns', name: 'd1' });
      m.assume('t', 'n1', cpu(5n), 0, { namespace: 'ns', name: 'd2' });
      expect(m.assumedOn('t', { readAtMs: 10_000, podsResourceVersion: '500' }, cache())).to.deep.equal(new Map([['n1', cpu(15n)]]));
      const moved = cache(delegate('d1', '600', 'n2'), delegate('d2', '601', 'n1', 'Failed'));
      expect(m.assumedOn('t', { readAtMs: 10_000, podsResourceVersion: '500' }, moved)).to.deep.equal(new Map([['n2', cpu(10n)]]));
    });

    it('ends the assumption of a delegate its target deleted at once, under the same summary or the next; a bind in flight keeps its reservation', () => {
      for (const told of [true, false]) {
        const m = new PlacementMemory({ toldOfDelegateChanges: told });
        m.assume('t', 'n1', cpu(10n), 0, { namespace: 'ns', name: 'd1' });
        m.assume('t', 'n1', cpu(5n), 0, { namespace: 'ns', name: 'd2' });
        m.reserve('t', { metadata: { name: 'p3' } }, cpu(1n), 0, { namespace: 'ns', name: 'd3' });
        const read = { readAtMs: 1000, podsResourceVersion: '500' };
        const both = cache(delegate('d1', '600', 'n1'), delegate('d2', '601', 'n1'), delegate('d3', '602', 'n1'));
        expect(m.assumedOn('t', read, both), `told: ${told}`).to.deep.equal(new Map([['n1', cpu(16n)]]));
        // d1 preempted a second after it was placed: the summary never counted it.
        m.delegateChanged('t', 'ns', 'd1');
        m.delegateGone('t', 'ns', 'd1');
        m.delegateGone('t', 'ns', 'd3');
        const after = cache(delegate('d2', '601', 'n1'), delegate('d3', '602', 'n1'));
        expect(m.assumedOn('t', read, after), `told: ${told}`).to.deep.equal(new Map([['n1', cpu(6n)]]));
        expect(m.assumedOn('t', { ...read, readAtMs: 2000 }, after), `told: ${told}`).to.deep.equal(new Map([['n1', cpu(6n)]]));
        m.delegateGone('t', 'ns', 'd2');
        m.delegateGone('t', 'ns', 'unknown');
        expect(m.assumedOn('t', read, cache(delegate('d3', '602', 'n1'))), `told: ${told}`).to.deep.equal(new Map([['n1', cpu(1n)]]));
      }
    });

    it('keeps an assumption the summary cannot confirm (delegate gone, versions that do not compare) at most maxAssumptionMs', () => {
      const m = new PlacementMemory({ maxAssumptionMs: 60_000 });
      m.assume('t', 'n1', cpu(10n), 0, { namespace: 'ns', name: 'd1' });
      const odd = cache(delegate('d1', 'abc', 'n1'));
      expect(m.assumedOn('t', { readAtMs: 59_999, podsResourceVersion: '500' }, odd).size).to.equal(1);
      expect(m.assumedOn('t', { readAtMs: 60_000, podsResourceVersion: '500' }, odd).size).to.equal(0);
    });
  });

  it('sums by node as a walk of every assumption would, through random placements, moves, drops and reads, told of delegate changes or not', () => {
    // The reference: the whole list walked and summed on every read.
    interface Ref {
      node: string;
      requests: Map<string, bigint>;
      atMs: number;
      delegate: { namespace: string; name: string };
    }
    const opts = { summaryLagMs: 3000, maxAssumptionMs: 60_000 };
    const reference = (list: Ref[], read: SummaryRead, delegateOf: (ns: string, name: string) => V1Pod | undefined) => {
      const kept: Ref[] = [];
      for (const a of list) {
        if (read.readAtMs - a.atMs >= opts.maxAssumptionMs) continue;
        const d = delegateOf(a.delegate.namespace, a.delegate.name);
        if (read.podsResourceVersion === undefined) {
          if (read.readAtMs - a.atMs >= opts.summaryLagMs) continue;
        } else if (d) {
          const counted = summaryCounts(read, d);
          if (counted !== undefined && (counted || isTerminal(d))) continue;
        }
        const node = d?.spec?.nodeName;
        kept.push(node && node !== a.node ? { ...a, node } : a);
      }
      const out = new Map<string, Map<string, bigint>>();
      for (const a of kept) {
        const sum = out.get(a.node) ?? new Map<string, bigint>();
        for (const [k, v] of a.requests) sum.set(k, (sum.get(k) ?? 0n) + v);
        out.set(a.node, sum);
      }
      return { kept, out };
    };
    for (let seed = 1; seed <= 20; seed++) {
      const r = prng(seed);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
      const m = new PlacementMemory(opts);
      // Told of every delegate change, it looks again under the same summary only at what changed.
      const told = new PlacementMemory({ ...opts, toldOfDelegateChanges: true });
      const lastRead = new Map<string, SummaryRead>();
      const lists = new Map<string, Ref[]>();
      const delegates = new Map<string, V1Pod>();
      let now = 0;
      let rv = 100;
      for (let step = 0; step < 400; step++) {
        now += Math.floor(r() * 500);
        const target = pick(['t1', 't2']);
        const op = r();
        if (op < 0.4) {
          const name = `d${step}`;
          const requests = new Map<string, bigint>([['cpu', BigInt(1 + Math.floor(r() * 1000))]]);
          if (r() < 0.5) requests.set('pods', 1n);
          if (r() < 0.3) requests.set('memory', BigInt(1 + Math.floor(r() * 2 ** 20)));
          const node = pick(['n1', 'n2', 'n3']);
          m.assume(target, node, requests, now, { namespace: 'ns', name });
          told.assume(target, node, requests, now, { namespace: 'ns', name });
          lists.set(target, [...(lists.get(target) ?? []), { node: node!, requests, atMs: now, delegate: { namespace: 'ns', name } }]);
        } else if (op < 0.7) {
          // The target's cache learns of a delegate: bound (maybe elsewhere), finished, or not yet.
          const all = [...lists.values()].flat();
          if (all.length === 0) continue;
          const a = pick(all);
          delegates.set(a.delegate.name, {
            metadata: { namespace: 'ns', name: a.delegate.name, resourceVersion: String((rv += 1 + Math.floor(r() * 5))) },
            spec: { containers: [], nodeName: r() < 0.8 ? pick(['n1', 'n2', 'n3']) : undefined },
            status: { phase: r() < 0.1 ? 'Failed' : 'Running' },
          });
          // The lookup below finds it for either target.
          for (const t of ['t1', 't2']) told.delegateChanged(t, 'ns', a.delegate.name);
        } else {
          // Half the time the summary has not been read again since the last read of this target.
          const read: SummaryRead =
            r() < 0.5 && lastRead.has(target) ? { ...lastRead.get(target)! } : { readAtMs: now, podsResourceVersion: r() < 0.2 ? undefined : String(rv - Math.floor(r() * 20)) };
          lastRead.set(target, read);
          // Now and then a caller without the target's cache: as if no delegate were in it.
          const delegateOf = r() < 0.1 ? undefined : (ns: string, name: string) => (ns === 'ns' ? delegates.get(name) : undefined);
          const want = reference(lists.get(target) ?? [], read, delegateOf ?? (() => undefined));
          lists.set(target, want.kept);
          expect(m.assumedOn(target, read, delegateOf), `seed ${seed} step ${step}`).to.deep.equal(want.out);
          expect(told.assumedOn(target, read, delegateOf), `told, seed ${seed} step ${step}`).to.deep.equal(want.out);
        }
      }
    }
  });

  describe('a bind in flight (reserve)', () => {
    const cpu = (n: bigint) => new Map([['cpu', n]]);
    const bound = (name: string): V1Pod => ({ metadata: { namespace: 'ns', name }, spec: { containers: [] } });
    const d = (name: string) => ({ namespace: 'ns', name });
    const delegate = (name: string, rv: string, nodeName?: string, conditions?: { type: string; status: string; reason: string }[]): V1Pod => ({
      metadata: { namespace: 'ns', name, resourceVersion: rv },
      spec: { nodeName, containers: [] },
      status: { phase: 'Pending', conditions },
    });
    const cache =
      (...pods: V1Pod[]) =>
      (namespace: string, name: string) =>
        pods.find((p) => p.metadata!.namespace === namespace && p.metadata!.name === name);
    const read = { readAtMs: 1000, podsResourceVersion: '50' };

    it('takes room from when the bind begins, on the node guessed once, each guess seeing those before it', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true });
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      m.reserve('t', bound('b'), cpu(2n), 0, d('b'));
      const asked: string[] = [];
      const guess = (pod: V1Pod, assumed: ReadonlyMap<string, Map<string, bigint>>) => {
        asked.push(`${pod.metadata!.name} seeing ${[...assumed.keys()].join(',')}`);
        return assumed.has('n1') ? 'n2' : 'n1';
      };
      expect(m.assumedOn('t', read, cache(), guess)).to.deep.equal(
        new Map([
          ['n1', cpu(3n)],
          ['n2', cpu(2n)],
        ]),
      );
      expect(m.assumedOn('t', read, cache(), guess)).to.deep.equal(
        new Map([
          ['n1', cpu(3n)],
          ['n2', cpu(2n)],
        ]),
      );
      expect(asked).to.deep.equal(['a seeing ', 'b seeing n1']);
      // No node fits (a pod for burst capacity, counted there): it takes no node's room.
      m.reserve('t', bound('c'), cpu(1n), 0, d('c'));
      expect(m.assumedOn('t', read, cache(), () => undefined).get('n1')).to.deep.equal(cpu(3n));
    });

    it("holds a delegate reserved twice once (a gang's plan, then its bind), and gives it back on one release", () => {
      const m = new PlacementMemory();
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      m.reserve('t', bound('a'), cpu(3n), 10, d('a'));
      expect(m.assumedOn('t', read, cache(), () => 'n1').get('n1')).to.deep.equal(cpu(3n));
      m.release('t', d('a'));
      expect(m.assumedOn('t', read, cache(), () => 'n1').size).to.equal(0);
    });

    it('is not ended by a summary while its delegate has no node, nor by time before maxAssumptionMs', () => {
      const m = new PlacementMemory({ summaryLagMs: 1000, maxAssumptionMs: 60_000 });
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      const pending = cache(delegate('a', '40'));
      expect(m.assumedOn('t', { readAtMs: 5000, podsResourceVersion: '99' }, pending, () => 'n1').get('n1')).to.deep.equal(cpu(3n));
      // A summary that cannot say which pods it counts: a placement's lag runs from the placement, not from the bind's start.
      expect(m.assumedOn('t', { readAtMs: 30_000 }, pending).get('n1')).to.deep.equal(cpu(3n));
      expect(m.assumedOn('t', { readAtMs: 60_000 }, pending).size).to.equal(0);
    });

    it('moves to the node the target scheduler chose, and to none while it reports the delegate Unschedulable', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true });
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      expect(m.assumedOn('t', read, cache(delegate('a', '40')), () => 'n1')).to.deep.equal(new Map([['n1', cpu(3n)]]));
      m.delegateChanged('t', 'ns', 'a');
      const unschedulable = delegate('a', '41', undefined, [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }]);
      expect(m.assumedOn('t', read, cache(unschedulable), () => 'n1').size).to.equal(0);
      m.delegateChanged('t', 'ns', 'a');
      expect(m.assumedOn('t', read, cache(delegate('a', '60', 'n2')), () => 'n1')).to.deep.equal(new Map([['n2', cpu(3n)]]));
    });

    it('never guesses a delegate already reported Unschedulable', () => {
      const m = new PlacementMemory();
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      const unschedulable = delegate('a', '41', undefined, [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }]);
      expect(m.assumedOn('t', read, cache(unschedulable), () => 'n1').size).to.equal(0);
    });

    it('gives its room back at once when released, under the same summary, the others kept on their nodes', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true });
      m.assume('t', 'n1', cpu(1n), 0, d('x'));
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      m.assume('t', 'n2', cpu(5n), 0, d('y'));
      const guess = () => 'n1';
      expect(m.assumedOn('t', read, cache(), guess)).to.deep.equal(
        new Map([
          ['n1', cpu(4n)],
          ['n2', cpu(5n)],
        ]),
      );
      m.release('t', d('a'));
      m.release('t', d('a'));
      // The last walk's positions still hold: one placed after the release is looked at (the
      // summary counts z already), y, now second, when it changes.
      m.assume('t', 'n4', cpu(7n), 0, d('z'));
      const later = cache(delegate('y', '60', 'n3'), delegate('z', '40', 'n4'));
      expect(m.assumedOn('t', read, later, guess)).to.deep.equal(
        new Map([
          ['n1', cpu(1n)],
          ['n2', cpu(5n)],
        ]),
      );
      m.delegateChanged('t', 'ns', 'y');
      expect(m.assumedOn('t', read, later, guess)).to.deep.equal(
        new Map([
          ['n1', cpu(1n)],
          ['n3', cpu(5n)],
        ]),
      );
    });

    it('becomes the assumption of its delegate once placed: counted once, on the node placed, then ended by the summary like any', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true, summaryLagMs: 1000 });
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      expect(m.assumedOn('t', read, cache(), () => 'n1')).to.deep.equal(new Map([['n1', cpu(3n)]]));
      // The delegate's requests as created (overhead included) replace the proxy's.
      m.assume('t', 'n2', cpu(4n), 900, d('a'));
      // Under the summary already walked, and no delegate change told: looked at again all the same.
      const placed = cache(delegate('a', '51', 'n2'));
      expect(m.assumedOn('t', read, placed, () => 'n1')).to.deep.equal(new Map([['n2', cpu(4n)]]));
      expect(m.assumedOn('t', { readAtMs: 1000, podsResourceVersion: '51' }, placed).size).to.equal(0);
      // release ends a reservation only: a placed delegate's assumption stays.
      m.assume('t', 'n2', cpu(4n), 900, d('b'));
      m.release('t', d('b'));
      expect(m.assumedOn('t', { readAtMs: 1500 }).get('n2')).to.deep.equal(cpu(4n));
    });

    it('holds the host ports of binds in flight and of delegates just placed on their node, each guess seeing those before it, until they end', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true });
      const port80 = [{ port: 80, protocol: 'TCP' }];
      m.reserve('t', bound('a'), cpu(1n), 0, d('a'), port80);
      m.reserve('t', bound('b'), cpu(1n), 0, d('b'), port80);
      const seen: string[] = [];
      const guess = (pod: V1Pod, _assumed: unknown, ports: ReadonlyMap<string, readonly { port: number }[]>) => {
        seen.push(`${pod.metadata!.name}: ${[...ports].map(([n, ps]) => `${n}=${ps.map((p) => p.port)}`).join(' ')}`);
        return ports.has('n1') ? 'n2' : 'n1';
      };
      m.assumedOn('t', read, cache(), guess);
      expect(seen).to.deep.equal(['a: ', 'b: n1=80']);
      expect(m.assumedPortsOn('t')).to.deep.equal(
        new Map([
          ['n1', port80],
          ['n2', port80],
        ]),
      );
      // Placed elsewhere than guessed: the ports move with it.
      m.assume('t', 'n3', cpu(1n), 900, d('a'), port80);
      m.assumedOn('t', read, cache(delegate('a', '51', 'n3')));
      expect(m.assumedPortsOn('t')).to.deep.equal(
        new Map([
          ['n3', port80],
          ['n2', port80],
        ]),
      );
      // Refused: given back at once. Counted by the summary: gone.
      m.release('t', d('b'));
      expect(m.assumedPortsOn('t')).to.deep.equal(new Map([['n3', port80]]));
      m.assumedOn('t', { readAtMs: 1000, podsResourceVersion: '51' }, cache(delegate('a', '51', 'n3')));
      expect(m.assumedPortsOn('t').size).to.equal(0);
    });

    it('is looked at again after assume under the same summary: one the summary counts already ends', () => {
      const m = new PlacementMemory({ toldOfDelegateChanges: true });
      m.reserve('t', bound('a'), cpu(3n), 0, d('a'));
      const placed = cache(delegate('a', '40', 'n2'));
      // The summary counts the delegate, but a bind in flight is kept whatever a summary says ...
      expect(m.assumedOn('t', read, cache(delegate('a', '40')), () => 'n1').get('n1')).to.deep.equal(cpu(3n));
      m.assume('t', 'n2', cpu(3n), 900, d('a'));
      // ... until it is placed: then that summary ends it.
      expect(m.assumedOn('t', read, placed).size).to.equal(0);
    });
  });

  it("avoids a target for a controller's pods until a time, then drops it; the oldest controllers go beyond the bound", () => {
    const m = new PlacementMemory({ maxPods: 2 });
    m.avoid('rs1', 't', 'stuck', 1000);
    expect(m.avoidance('rs1', 't', 999)).to.deep.equal({ reason: 'stuck', untilMs: 1000 });
    expect(m.avoidance('rs1', 'other', 999)).to.equal(undefined);
    expect(m.avoidance(undefined, 't', 999)).to.equal(undefined);
    expect(m.avoidance('rs1', 't', 1000)).to.equal(undefined);
    // Three controllers, two kept: the first avoided again is the newest, so the second goes.
    for (const owner of ['rs1', 'rs2', 'rs1', 'rs3']) m.avoid(owner, 't', 'stuck', 5000);
    expect(['rs1', 'rs2', 'rs3'].map((owner) => m.avoidance(owner, 't', 0) !== undefined)).to.deep.equal([true, false, true]);
  });
});
