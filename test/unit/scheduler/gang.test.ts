import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { ClusterRegistry } from '../../../provider/clusters/cluster-registry.js';
import { createTargetClient } from '../../../provider/clusters/target-client.js';
import { FakeClock } from '../../../provider/core/clock.js';
import { ELECT_ANNOTATION, HAS_FINALIZER_LABEL, SOURCE_POD_MANIFEST_ANNOTATION } from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { virtualNodeName } from '../../../provider/model/names.js';
import { gangOf, MAX_GANG_SIZE, type PodGroupObject } from '../../../provider/model/pod-group.js';
import type { TargetRef } from '../../../provider/model/types.js';
import { delegateRequests } from '../../../scheduler/bind.js';
import { createExtender, FILTER_PATH, type ExtenderFilterResult, type TargetState } from '../../../scheduler/extender-server.js';
import { GangPlans, planGang, type GangMember, type GangTarget } from '../../../scheduler/gang.js';
import { PlacementMemory } from '../../../scheduler/placement-memory.js';
import { settle } from '../../support/fake-time.js';
import { kubeConfig, node, nodesOf, runningOn } from './fixtures.js';

/** A member asking for one cpu. */
const member = (name: string): GangMember => ({ uid: `uid-${name}`, proxy: { metadata: { name, namespace: 'ns', uid: `uid-${name}` } }, delegateName: `${name}-d` });
const members = (n: number) => Array.from({ length: n }, (_, i) => member(`m${i}`));

/** A target that seats `room` members (in each domain value of `domains`, when given). */
function target(key: string, room: number, domains: Record<string, number> = {}): GangTarget & { seatsMade: number } {
  const t = {
    key,
    name: key,
    seatsMade: 0,
    seats(domain?: { key: string; value: string }) {
      t.seatsMade++;
      let left = domain ? (domains[domain.value] ?? 0) : room;
      return () => left-- > 0;
    },
    *domainValues() {
      yield* Object.keys(domains);
    },
  };
  return t;
}

describe('scheduler: planGang', () => {
  it('keeps a gang in the one target with room for all of it, the roomiest first', () => {
    const plan = planGang(members(8), 8, [target('a', 5), target('b', 9), target('c', 8)], { oneTarget: true });
    expect('reason' in plan ? plan.reason : [...plan.shares]).to.deep.equal([['b', 8]]);
  });

  it('refuses a gang kept in one target when none holds it, with what each has room for', () => {
    const plan = planGang(members(8), 8, [target('a', 4), target('b', 4)], { oneTarget: true });
    expect(plan).to.deep.equal({ reason: 'no single target has room for 8: a for 4, b for 4' });
  });

  it('splits a gang free to span targets only when no target holds it, the roomiest first', () => {
    const whole = planGang(members(8), 8, [target('a', 4), target('b', 8)]);
    expect('reason' in whole ? whole.reason : [...whole.shares]).to.deep.equal([['b', 8]]);
    const split = planGang(members(8), 8, [target('a', 3), target('b', 5)]);
    expect('reason' in split ? split.reason : [...split.shares]).to.deep.equal([
      ['b', 5],
      ['a', 3],
    ]);
  });

  it('refuses a gang the targets together cannot hold, with the room of each', () => {
    expect(planGang(members(8), 8, [target('a', 3), target('b', 4)])).to.deep.equal({ reason: 'the targets together have room for 7 of 8: a for 3, b for 4' });
  });

  it('plans only the members it needs (minCount less those bound), the first ones in order', () => {
    const plan = planGang(members(6), 2, [target('a', 9)]);
    expect('reason' in plan ? plan.reason : [...plan.assigned.keys()]).to.deep.equal(['uid-m0', 'uid-m1']);
  });

  it('keeps a gang with a real node key in one domain of it, across targets', () => {
    // z1 seats 2 + 3, z2 seats 4 + 2.
    const targets = () => [target('a', 9, { z1: 2, z2: 4 }), target('b', 9, { z1: 3, z2: 2 })];
    const plan = planGang(members(6), 6, targets(), { domainKey: 'zone' });
    expect('reason' in plan ? plan.reason : { domain: plan.domain, shares: [...plan.shares] }).to.deep.equal({
      domain: { key: 'zone', value: 'z2' },
      shares: [
        ['a', 4],
        ['b', 2],
      ],
    });
    // The roomiest domain is named first.
    expect(planGang(members(7), 7, targets(), { domainKey: 'zone' })).to.deep.equal({ reason: 'no domain of zone has room for 7: zone=z2 for 6, zone=z1 for 5' });
  });
});

describe('scheduler: GangPlans', () => {
  const gang = { namespace: 'ns', name: 'g', minCount: 3 };
  function setup() {
    const clock = new FakeClock(1_000_000);
    const held = new Map<string, string>();
    const plans = new GangPlans({ clock, reserve: (key, m) => held.set(m.uid, key), release: (_key, m) => held.delete(m.uid), ttlMs: 30_000 });
    const ms = members(3);
    plans.adopt(gang, { assigned: new Map(ms.map((m) => [m.uid, 'T'])), shares: new Map([['T', 3]]) }, ms);
    return { clock, held, plans };
  }

  it("takes every planned member's room when a plan is adopted, and tells each member its target and its share", () => {
    const { held, plans } = setup();
    expect([...held.values()]).to.deep.equal(['T', 'T', 'T']);
    expect(plans.assignmentOf('uid-m1')).to.deep.include({ targetKey: 'T', share: 3 });
  });

  it("resolves a member's wait only once every member's delegate is placed", async () => {
    const { plans } = setup();
    const done: string[] = [];
    const waits = ['uid-m0', 'uid-m1'].map((uid) => plans.placed(uid, 10_000).then(() => done.push(uid)));
    await settle();
    expect(done).to.deep.equal([]);
    await plans.placed('uid-m2', 10_000);
    await Promise.all(waits);
    expect(done.sort()).to.deep.equal(['uid-m0', 'uid-m1']);
  });

  it('fails every waiting member when one fails, gives back the room of the unbound, and fails a member that comes later', async () => {
    const { held, plans } = setup();
    const waiting = plans.placed('uid-m0', 10_000).catch((err: Error) => err.message);
    plans.memberFailed('uid-m1', 'the bind of ns/m1 failed');
    expect(await waiting).to.equal('pod group ns/g was not placed: the bind of ns/m1 failed');
    expect(held.size).to.equal(0);
    expect(plans.assignmentOf('uid-m2')).to.equal(undefined);
    expect(plans.holds('uid-m2')).to.equal(true);
    expect(await plans.placed('uid-m2', 10_000).catch((err: Error) => err.message)).to.match(/was not placed/);
  });

  it('fails a plan whose members are not all placed in time, on the fake clock', async () => {
    const { clock, plans } = setup();
    const waiting = plans.placed('uid-m0', 5_000).catch((err: Error) => err.message);
    for (let i = 0; i < 6; i++) {
      clock.advance(1000);
      await settle();
    }
    expect(await waiting).to.equal('pod group ns/g was not placed: 2 of its 3 members were not placed in time');
  });

  it('counts as longest waiting the gang refused first that is still tried, and lets the next one hold once the first is no longer tried', () => {
    const { clock, plans } = setup();
    expect(plans.waited('ns/old')).to.equal(true);
    clock.advance(1000);
    expect(plans.waited('ns/young')).to.equal(false);
    expect(plans.waited('ns/old')).to.equal(true);
    clock.advance(15_001);
    expect(plans.waited('ns/young')).to.equal(true);
    // Tried again after a pause, old waits anew: young has waited longer now.
    clock.advance(1);
    expect(plans.waited('ns/old')).to.equal(false);
  });

  it('ends a plan once all its members are bound, and keeps their room (the binder holds it then)', async () => {
    const { held, plans } = setup();
    await Promise.all(['uid-m0', 'uid-m1', 'uid-m2'].map((uid) => plans.placed(uid, 10_000)));
    for (const uid of ['uid-m0', 'uid-m1', 'uid-m2']) plans.bound(uid);
    expect(plans.size).to.equal(0);
    expect(plans.current('ns/g')).to.equal(undefined);
    expect(held.size).to.equal(3);
  });
});

describe('model: gangOf', () => {
  const pg = (spec: PodGroupObject['spec']): PodGroupObject => ({ metadata: { name: 'g', namespace: 'ns' }, spec });
  it('reads minCount and the topology key of a gang, and no gang of the basic policy', () => {
    expect(gangOf(pg({ schedulingPolicy: { gang: { minCount: 4 } }, schedulingConstraints: { topology: [{ key: 'zone' }] } }))).to.deep.equal({
      gang: { namespace: 'ns', name: 'g', minCount: 4, topologyKey: 'zone' },
    });
    expect(gangOf(pg({ schedulingPolicy: { basic: {} } }))).to.equal(undefined);
  });
  it(`refuses a minCount that is not a positive integer, or above ${MAX_GANG_SIZE}, with the reason`, () => {
    expect(gangOf(pg({ schedulingPolicy: { gang: { minCount: 0 } } }))).to.deep.equal({ invalid: 'PodGroup ns/g has no valid spec.schedulingPolicy.gang.minCount' });
    expect(gangOf(pg({ schedulingPolicy: { gang: { minCount: MAX_GANG_SIZE + 1 } } }))).to.deep.equal({
      invalid: `PodGroup ns/g asks for a gang of ${MAX_GANG_SIZE + 1}: the extender plans gangs of at most ${MAX_GANG_SIZE} pods`,
    });
  });
});

describe('scheduler: the extender filter with gangs', () => {
  const ref = (name: string): TargetRef => ({ kind: 'ClusterTarget', namespace: '', name });
  const A = ref('a');
  const B = ref('b');
  const V = (r: TargetRef) => virtualNodeName(r);

  /** A proxy of group g asking for 3 cpu. */
  function proxy(name: string, nodeName?: string): V1Pod {
    const spec = { containers: [{ name: 'c', image: 'x', resources: { requests: { cpu: '3' } } }] };
    return {
      metadata: {
        name,
        namespace: 'ns',
        uid: `uid-${name}`,
        labels: { [HAS_FINALIZER_LABEL]: 'true' },
        annotations: { [ELECT_ANNOTATION]: '', [SOURCE_POD_MANIFEST_ANNOTATION]: JSON.stringify({ metadata: { name }, spec }) },
      },
      spec: { ...spec, schedulerName: 'admiralty-proxy', schedulingGroup: { podGroupName: 'g' }, ...(nodeName ? { nodeName } : {}) } as V1Pod['spec'],
    };
  }

  /** Targets a (one node of 4 cpu: room for one member) and b (two of 4: room for two), a gang of `minCount` with `key`. */
  function setup(minCount: number, key: string | undefined, group: V1Pod[], busy: V1Pod[] = []) {
    const registry = new ClusterRegistry();
    for (const r of [A, B]) {
      registry.set(createTargetClient(r, kubeConfig(), 'fp', false), V(r));
      registry.setHealth(`ClusterTarget/${r.name}`, { ready: true, reason: 'Ready', message: '', sinceMs: 0 });
    }
    const states: Record<string, TargetState> = {
      'ClusterTarget/a': { nodes: nodesOf([node('a-1')]), readAtMs: 0 },
      'ClusterTarget/b': { nodes: nodesOf([node('b-1'), node('b-2')], busy), readAtMs: 0 },
    };
    const clock = new FakeClock(1_000_000);
    const memory = new PlacementMemory();
    const metricsRegistry = new Registry();
    const events: { kind: string; name?: string; type: string; reason: string; message: string }[] = [];
    const delegateKey = (m: GangMember) => ({ namespace: 'ns', name: m.delegateName });
    const plans = new GangPlans({
      clock,
      reserve: (k, m) => memory.reserve(k, m.proxy, delegateRequests(m.proxy, undefined), clock.now(), delegateKey(m)),
      release: (k, m) => memory.release(k, delegateKey(m)),
    });
    const pg: PodGroupObject = { metadata: { name: 'g', namespace: 'ns' }, spec: { schedulingPolicy: { gang: { minCount } }, ...(key ? { schedulingConstraints: { topology: [{ key }] } } : {}) } };
    const extender = createExtender({
      registry,
      targetState: (k) => states[k],
      policy: { kind: 'spread' },
      memory,
      clock,
      logger: silentLogger(),
      metricsRegistry,
      events: { record: (obj, type, reason, message) => events.push({ kind: obj.kind, name: obj.metadata.name, type, reason, message }) },
      gangs: { plans, podGroup: (ns, name) => (ns === 'ns' && name === 'g' ? pg : undefined), members: () => group, delegateName: (p) => `${p.metadata!.name}-d` },
    });
    const route = extender.routes.find((r) => r.path === FILTER_PATH)!;
    const filter = (p: V1Pod) =>
      (route.handle({ path: '', connection: undefined as never, body: Buffer.from(JSON.stringify({ Pod: p, NodeNames: [V(A), V(B)] })) }) as { json: ExtenderFilterResult }).json;
    return { filter, plans, clock, explain: extender.explain, metricsRegistry, events };
  }

  it('places a gang of 3 free to span as one plan: each member is offered only its planned node, 2 in b and 1 in a; admiralty_gangs counts it placing', async () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const { filter, plans, metricsRegistry } = setup(3, undefined, group);
    const offered = group.map((p) => filter(p).NodeNames);
    expect(offered).to.deep.equal([[V(B)], [V(B)], [V(A)]]);
    expect(plans.size).to.equal(1);
    expect(await metricsRegistry.getSingleMetricAsString('admiralty_gangs')).to.include('admiralty_gangs{state="placing"} 1');
  });

  it('says on the PodGroup, once, where its plan puts it, and once why it waits while that stays the same', () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const planned = setup(3, undefined, group);
    for (const p of group) planned.filter(p);
    expect(planned.events).to.deep.equal([{ kind: 'PodGroup', name: 'g', type: 'Normal', reason: 'GangPlanned', message: 'placing 3 pods at once: 2 in b, 1 in a' }]);
    const waiting = setup(3, 'multicluster.admiralty.io/cluster-target-name', group);
    for (const p of [...group, ...group]) waiting.filter(p);
    expect(waiting.events.map((e) => [e.type, e.reason])).to.deep.equal([['Warning', 'GangWaiting']]);
    expect(waiting.events[0]!.message).to.match(
      /^pod group ns\/g \(minCount 3, topology multicluster.admiralty.io\/cluster-target-name\) needs room for 3 pods at once: no single target has room for 3/,
    );
  });

  it("explains a gang's member as the filter would place it, adopting no plan and holding nothing", () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const { explain, plans } = setup(3, undefined, group);
    const verdicts = explain(group[2]!);
    // Planned first, as the first member filtered would be: in b, the roomiest.
    expect(verdicts.map((v) => [v.target, v.passes])).to.deep.equal([
      ['a', false],
      ['b', true],
    ]);
    expect(verdicts[0]!.reason).to.equal(`its pod group's plan puts this pod on ${V(B)}`);
    expect(plans.size).to.equal(0);
    const kept = setup(3, 'multicluster.admiralty.io/cluster-target-name', group, [runningOn('b-1', { cpu: '3' })]);
    kept.explain(group[0]!);
    expect(kept.plans.holding).to.equal(0);
  });

  it('refuses every node to a gang of 3 kept in one target when none has room for 3, and says what each has', () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const { filter, plans } = setup(3, 'multicluster.admiralty.io/cluster-target-name', group);
    const r = filter(group[0]!);
    expect(r.NodeNames).to.deep.equal([]);
    expect(r.Error).to.equal(
      'no target can run this pod now (retried with backoff): pod group ns/g (minCount 3, topology multicluster.admiralty.io/cluster-target-name) needs room for 3 pods at once: no single target has room for 3: b for 2, a for 1; it would not fit even if the targets ran nothing else',
    );
    expect(plans.size).to.equal(0);
  });

  it('refuses a member while its group has fewer pods than minCount, and counts the bound ones toward it', () => {
    const { filter } = setup(3, undefined, [proxy('p0'), proxy('p1')]);
    expect(filter(proxy('p0')).Error).to.match(/2 of its 3 pods exist; waiting for the rest$/);
    const bound = setup(3, undefined, [proxy('p0'), proxy('p1'), proxy('done', V(B))]);
    expect(bound.filter(proxy('p0')).NodeNames).to.have.length(1);
  });

  it('takes the whole plan’s room at once: a pod of no gang filtered after the first member finds b and a full', () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const { filter } = setup(3, undefined, group);
    filter(group[0]!);
    const loner = proxy('loner');
    delete (loner.spec as { schedulingGroup?: unknown }).schedulingGroup;
    expect(filter(loner).NodeNames).to.deep.equal([]);
  });

  it('lets the gang that waited longest hold the target it would take once room frees: a pod of no higher priority is kept off it, until the gang is no longer tried', () => {
    // b-1 runs 3 cpu: a and b have room for one member each now; b for two once b-1 is free.
    const group = ['p0', 'p1'].map((n) => proxy(n));
    const { filter, plans, clock } = setup(2, 'multicluster.admiralty.io/cluster-target-name', group, [runningOn('b-1', { cpu: '3' })]);
    expect(filter(group[0]!).Error).to.match(/no single target has room for 2: a for 1, b for 1; as the gang that has waited longest, it holds b against pods of no higher priority while it waits$/);
    expect(plans.holding).to.equal(1);
    const loner = proxy('loner');
    delete (loner.spec as { schedulingGroup?: unknown }).schedulingGroup;
    const r = filter(loner);
    expect(r.NodeNames).to.deep.equal([V(A)]);
    expect(r.FailedNodes[V(B)]).to.match(/^held for pod group ns\/g, which has waited longest for room there \(since /);
    const urgent = structuredClone(loner);
    urgent.spec!.priority = 1000;
    expect(filter(urgent).NodeNames).to.deep.equal([V(A), V(B)]);
    clock.advance(15_001);
    expect(filter(loner).NodeNames).to.deep.equal([V(A), V(B)]);
    expect(plans.holding).to.equal(0);
  });

  it('lets a waiting gang hold its target for two minutes at most, though it keeps trying', () => {
    const group = ['p0', 'p1'].map((n) => proxy(n));
    const { filter, plans, clock } = setup(2, 'multicluster.admiralty.io/cluster-target-name', group, [runningOn('b-1', { cpu: '3' })]);
    for (let s = 0; s <= 120; s += 10) {
      filter(group[0]!);
      clock.advance(10_000);
    }
    expect(filter(group[0]!).Error).to.not.match(/it holds/);
    expect(plans.holding).to.equal(0);
  });

  it('refuses a gang that would not fit even on empty targets, and holds nothing for it', () => {
    const group = ['p0', 'p1', 'p2'].map((n) => proxy(n));
    const { filter, plans } = setup(3, 'multicluster.admiralty.io/cluster-target-name', group);
    expect(filter(group[0]!).Error).to.match(/it would not fit even if the targets ran nothing else$/);
    expect(plans.holding).to.equal(0);
  });
});
