import type { V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { expect } from 'chai';
import { heldOnNode } from '../../../provider/model/resources.js';
import { budgetFields, budgetViolators, victimsOnOneNode, type PreemptionCandidate } from '../../../scheduler/preempt.js';
import { node, nodesOf, pod, runningOn } from './fixtures.js';

const OPTS = { targetName: 'c2', targetLabels: {} };

/** A proxy of `priority` whose delegate holds `cpu` on `on`, and that delegate as the target's summary counts it. */
function victim(name: string, on: string, cpu: string, priority: number): { candidate: PreemptionCandidate; delegate: V1Pod } {
  const proxy = pod(name, { cpu }, { priority });
  proxy.metadata!.uid = `uid-${name}`;
  const delegate = runningOn(on, { cpu });
  return { candidate: { proxy, node: on, requests: heldOnNode(delegate) }, delegate };
}

/** Two 32-cpu nodes, each running two of these victims. */
function cluster(victims: ReturnType<typeof victim>[]) {
  const nodes = nodesOf(
    [node('n0', { allocatable: { cpu: '32', pods: '110' } }), node('n1', { allocatable: { cpu: '32', pods: '110' } })],
    victims.map((v) => v.delegate),
  );
  return { nodes, candidates: victims.map((v) => v.candidate) };
}

const names = (r: ReturnType<typeof victimsOnOneNode>) => r && { node: r.node, victims: r.victims.map((v) => v.metadata!.name).sort() };

describe('scheduler: victimsOnOneNode', () => {
  const four = () => [victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 100), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 100)];

  it('takes the victims of one real node that make room there, not the fewest by the sum of all nodes', () => {
    // 4 cpu free on each node; 24 needs both victims of one node (one of each would do by the sum: 8 + 28).
    const { nodes, candidates } = cluster(four());
    expect(names(victimsOnOneNode(pod('high', { cpu: '24' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n0', victims: ['a', 'b'] });
  });

  it('takes as few as do, reprieving the highest priority first', () => {
    const { nodes, candidates } = cluster([victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 500), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 100)]);
    // 18 fits beside one victim's room (4 + 14): on n0 the priority-500 one is spared; n1 needs one too, and its victim's priority is as low, so the first node by name wins.
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n0', victims: ['a'] });
  });

  it('prefers the node whose victims have the lowest priority, at equal counts', () => {
    const { nodes, candidates } = cluster([victim('a', 'n0', '14', 300), victim('b', 'n0', '14', 300), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 200)]);
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['c'] });
  });

  it('preempts nothing when no node could hold the pod, whatever goes', () => {
    const { nodes, candidates } = cluster(four());
    expect(victimsOnOneNode(pod('high', { cpu: '40' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
  });

  it('never takes a proxy of equal or higher priority, nor one being deleted', () => {
    const vs = four();
    vs[0]!.candidate.proxy.spec!.priority = 1000;
    vs[1]!.candidate.proxy.metadata!.deletionTimestamp = new Date();
    vs[2]!.candidate.proxy.spec!.priority = 2000;
    const { nodes, candidates } = cluster(vs);
    // n0: only b could go, and it is going already; n1: only d, which frees 18, short of 24.
    expect(victimsOnOneNode(pod('high', { cpu: '24' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
    expect(names(victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['d'] });
  });

  it("preempts nothing on a node that does not match the pod's other constraints", () => {
    const { nodes, candidates } = cluster(four());
    const picky = pod('high', { cpu: '24' }, { priority: 1000, nodeSelector: { 'kubernetes.io/hostname': 'n1' } });
    expect(names(victimsOnOneNode(picky, nodes, candidates, OPTS))).to.deep.equal({ node: 'n1', victims: ['c', 'd'] });
  });

  it('preempts nothing where the pod fits already', () => {
    const { nodes, candidates } = cluster(four());
    expect(victimsOnOneNode(pod('high', { cpu: '2' }, { priority: 1000 }), nodes, candidates, OPTS)).to.equal(undefined);
  });
});

/** A budget of namespace default over the pods labelled `app`, allowing `allowed` disruptions. */
function budget(app: string, allowed: number, extra: Partial<V1PodDisruptionBudget['status']> = {}): V1PodDisruptionBudget {
  return {
    metadata: { name: `pdb-${app}`, namespace: 'default' },
    spec: { selector: { matchLabels: { app } } },
    status: { disruptionsAllowed: allowed, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0, ...extra },
  };
}

function labelled(name: string, app: string, namespace = 'default'): V1Pod {
  const p = pod(name, {}, {}, namespace);
  p.metadata!.labels = { app };
  return p;
}

describe('scheduler: victimsOnOneNode and PodDisruptionBudgets', () => {
  /** a and b on n0 are guarded; c and d on n1 are not. */
  const guarded = () => {
    const vs = [victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 100), victim('c', 'n1', '14', 100), victim('d', 'n1', '14', 100)];
    for (const v of vs) v.candidate.proxy.metadata!.labels = { app: ['a', 'b'].includes(v.candidate.proxy.metadata!.name!) ? 'guarded' : 'free' };
    return vs;
  };

  it("takes the victims of the node whose proxies no budget protects, where kube-scheduler's tie would take the first node's", () => {
    const { nodes, candidates } = cluster(guarded());
    const high = pod('high', { cpu: '24' }, { priority: 1000 });
    expect(names(victimsOnOneNode(high, nodes, candidates, OPTS))).to.deep.equal({ node: 'n0', victims: ['a', 'b'] });
    const r = victimsOnOneNode(high, nodes, candidates, OPTS, [budget('guarded', 0)]);
    expect(names(r)).to.deep.equal({ node: 'n1', victims: ['c', 'd'] });
    expect(r!.violations).to.equal(0);
  });

  it('counts the violations it cannot avoid, and spares the protected proxy on a node where one victim will do', () => {
    // Only n0 has them all: 18 cpu needs one of its two, and the unprotected one goes.
    const vs = [victim('a', 'n0', '14', 100), victim('b', 'n0', '14', 100)];
    vs[0]!.candidate.proxy.metadata!.labels = { app: 'guarded' };
    const { nodes, candidates } = cluster(vs);
    const r = victimsOnOneNode(pod('high', { cpu: '18' }, { priority: 1000 }), nodes, candidates, OPTS, [budget('guarded', 0)]);
    expect(names(r)).to.deep.equal({ node: 'n0', victims: ['b'] });
    expect(r!.violations).to.equal(0);
    // 24 cpu: both must go, one against its budget.
    const both = victimsOnOneNode(pod('high', { cpu: '24' }, { priority: 1000 }), nodes, candidates, OPTS, [budget('guarded', 0)]);
    expect(names(both)).to.deep.equal({ node: 'n0', victims: ['a', 'b'] });
    expect(both!.violations).to.equal(1);
  });
});

describe('scheduler: budgetViolators (upstream filterPodsWithPDBViolation)', () => {
  const [a, b, c] = [labelled('a', 'web'), labelled('b', 'web'), labelled('c', 'web')];
  const names = (s: Set<V1Pod>) => [...s].map((p) => p.metadata!.name).sort();

  it('spends the allowed disruptions on the most important pods first, and the rest violate', () => {
    expect(names(budgetViolators([a, b, c], [budget('web', 1)]))).to.deep.equal(['b', 'c']);
    expect(names(budgetViolators([a, b, c], [budget('web', 3)]))).to.deep.equal([]);
  });

  it('does not count a pod the budget lists as disrupted already', () => {
    expect(names(budgetViolators([a, b, c], [budget('web', 1, { disruptedPods: { a: new Date() } })]))).to.deep.equal(['c']);
    // A pod's name is looked up as a key of that map only, not of what every object inherits.
    expect(names(budgetViolators([labelled('constructor', 'web')], [budget('web', 0, { disruptedPods: {} })]))).to.deep.equal(['constructor']);
  });

  it('ignores budgets of other namespaces and other labels, pods without labels, and selectors that are empty, absent or invalid', () => {
    const other = { ...budget('web', 0), metadata: { name: 'x', namespace: 'other' } };
    expect(names(budgetViolators([a, b, pod('bare')], [other, budget('api', 0)]))).to.deep.equal([]);
    const empty = { ...budget('web', 0), spec: { selector: {} } };
    const absent = { ...budget('web', 0), spec: {} };
    const invalid = { ...budget('web', 0), spec: { selector: { matchExpressions: [{ key: 'app', operator: 'Gt', values: ['1'] }] } } };
    expect(names(budgetViolators([a], [empty, absent, invalid]))).to.deep.equal([]);
  });

  it('matches expressions as label selectors do', () => {
    const exprs = (operator: string, values?: string[]) => ({ ...budget('web', 0), spec: { selector: { matchExpressions: [{ key: 'app', operator, values }] } } });
    expect(names(budgetViolators([a], [exprs('In', ['web', 'api'])]))).to.deep.equal(['a']);
    expect(names(budgetViolators([a], [exprs('NotIn', ['web'])]))).to.deep.equal([]);
    expect(names(budgetViolators([a], [exprs('Exists')]))).to.deep.equal(['a']);
    expect(names(budgetViolators([a], [exprs('DoesNotExist')]))).to.deep.equal([]);
  });

  it('reads the same from what the budgets cache keeps', () => {
    const full: V1PodDisruptionBudget = {
      ...budget('web', 1, { disruptedPods: { a: new Date() }, currentHealthy: 3 }),
      metadata: { name: 'p', namespace: 'default', resourceVersion: '5', managedFields: [{ manager: 'kubectl' }] },
    };
    const kept = budgetFields(full);
    expect(kept.metadata).to.deep.equal({ name: 'p', namespace: 'default', resourceVersion: '5' });
    expect(names(budgetViolators([a, b, c], [kept]))).to.deep.equal(names(budgetViolators([a, b, c], [full])));
  });
});
