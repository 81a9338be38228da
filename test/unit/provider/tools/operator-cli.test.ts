import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { FAILOVER_AFTER_ANNOTATION } from '../../../../provider/core/keys.js';
import type { PodExplanation } from '../../../../provider/kubelet/operator-views.js';
import { renderExplanation } from '../../../../provider/tools/explain.js';
import { formatAge, loadOperatorKubeconfig, parseOutputFormat, renderTable } from '../../../../provider/tools/operator-api.js';
import { FakeClock } from '../../../../provider/core/clock.js';
import { buildStatusReport, printStatus, renderStatus, type StatusInput } from '../../../../provider/tools/status.js';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();

function input(): StatusInput {
  const target = (name: string, ready: 'True' | 'False', extra: { reason?: string; message?: string } = {}) => ({
    metadata: { name, namespace: 'ns' },
    spec: {},
    status: {
      virtualNodeName: `admiralty-namespace-ns-${name}`,
      conditions: [{ type: 'Ready', status: ready, reason: extra.reason ?? 'TargetReady', message: extra.message ?? '', lastTransitionTime: iso(NOW) }],
    },
  });
  const proxy = (name: string, node: string | undefined, phase?: string) => ({ metadata: { name, namespace: 'ns' }, spec: { containers: [], nodeName: node }, status: phase ? { phase } : {} });
  return {
    cluster: 'c1',
    targets: [target('c2', 'False', { reason: 'TargetUnreachable', message: 'connect ECONNREFUSED' }), target('c1', 'True')],
    clusterTargets: [],
    proxies: [proxy('a', 'admiralty-namespace-ns-c1', 'Running'), proxy('b', 'admiralty-namespace-ns-c1', 'Pending'), proxy('c', 'admiralty-namespace-ns-c1', 'Succeeded'), proxy('d', undefined)],
    namespaces: new Map([['ns', { metadata: { name: 'ns', annotations: { [FAILOVER_AFTER_ANNOTATION]: '30s' } } }]]),
    views: new Map([
      [
        'admiralty-namespace-ns-c1',
        {
          node: 'admiralty-namespace-ns-c1',
          target: 'ns/c1',
          ready: true,
          reason: 'TargetReady',
          message: '',
          refusals: [
            { source: 'filter', reason: 'NoNodeFits', count: 4, lastMessage: 'no node in ns/c1 fits: 1 Insufficient cpu (largest free 3)', lastAt: iso(NOW - 60_000) },
            { source: 'bind', reason: 'DelegateNotPlaced', count: 2, lastMessage: 'ns/c1: 0/1 nodes are available', lastAt: iso(NOW - 30_000) },
            { source: 'filter', reason: 'KeptOffAfterRefusal', count: 1, lastMessage: 'refused 3 s ago: ns/c1: 0/1 nodes are available', lastAt: iso(NOW - 27_000) },
          ],
          summary: { readAt: iso(NOW - 7000), largestFree: { cpu: '3', memory: '4Gi', pods: '100' }, totalFree: { cpu: '5', memory: '6Gi', pods: '200' }, nodes: 2, schedulableNodes: 2 },
        },
      ],
      ['admiralty-namespace-ns-c2', { error: 'the provider answered 403: Forbidden' }],
    ]),
    leaseNamespace: 'admiralty',
    lease: { spec: { holderIdentity: 'admiralty-7d9-x-1', renewTime: new Date(NOW - 2000) as never, leaseDurationSeconds: 15 } },
    providerPods: [
      { metadata: { name: 'admiralty-7d9-x' }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } },
      { metadata: { name: 'admiralty-7d9-y' }, status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] } },
    ],
  };
}

describe('tools: status and explain output', () => {
  it('reports each target with its readiness, summary age and room, proxies by phase, failover, the refusals the provider counted, and the leading replica', () => {
    const report = buildStatusReport(input(), NOW);
    expect(report.targets.map((t) => t.name)).to.deep.equal(['c1', 'c2']);
    const [c1, c2] = report.targets;
    expect(c1).to.deep.include({ ready: 'True', summaryAgeSeconds: 7, failoverAfter: '30s', proxies: { bound: 3, running: 1, pending: 1, other: 1 } });
    expect(c1).to.not.have.property('reason');
    expect(c2).to.deep.include({ ready: 'False', reason: 'TargetUnreachable', message: 'connect ECONNREFUSED', provider: { error: 'the provider answered 403: Forbidden' } });
    expect(report.provider.leader).to.deep.equal({ identity: 'admiralty-7d9-x-1', renewTime: iso(NOW - 2000), renewedSecondsAgo: 2, leaseDurationSeconds: 15 });
    expect(report.provider.replicas).to.deep.equal([
      { name: 'admiralty-7d9-x', seenAs: 'pod', phase: 'Running', ready: true, leader: true },
      { name: 'admiralty-7d9-y', seenAs: 'pod', phase: 'Running', ready: false, leader: false },
    ]);
    expect(c1!.refusals.map((r) => [r.reason, r.count])).to.deep.equal([
      ['NoNodeFits', 4],
      ['DelegateNotPlaced', 2],
      ['KeptOffAfterRefusal', 1],
    ]);
    expect(c2!.refusals).to.deep.equal([]);
  });

  it('lists a leader outside the cluster, seen only as the Lease holder, and no leader once its Lease expired', () => {
    const outside = { ...input(), providerPods: [], lease: { spec: { holderIdentity: 'c1-provider-4242', renewTime: new Date(NOW - 2000) as never, leaseDurationSeconds: 15 } } };
    const report = buildStatusReport(outside, NOW);
    expect(report.provider.replicas).to.deep.equal([{ name: 'c1-provider-4242', seenAs: 'lease', leader: true }]);
    const text = renderStatus(report, false);
    expect(text).to.match(/^REPLICA\s+SEEN AS\s+PHASE\s+READY\s+LEADER\nc1-provider-4242\s+Lease holder\s+-\s+-\s+yes$/m);
    expect(text).to.include('replicas outside the cluster are seen only while they lead');
    const expired = buildStatusReport({ ...outside, lease: { spec: { ...outside.lease.spec, renewTime: new Date(NOW - 20_000) as never } } }, NOW);
    expect(expired.provider.replicas).to.deep.equal([]);
    expect(renderStatus(expired, false)).to.include('(expired: no replica leads)');
  });

  it('prints the report as a table, with the two most frequent refusals in a cell, why a target is not ready and why figures are missing under it, and (wide) what each refusal last said', () => {
    const text = renderStatus(buildStatusReport(input(), NOW), false);
    expect(text.split('\n').slice(0, 4)).to.deep.equal([
      'Cluster c1: 2 target(s)',
      'TARGET   VIRTUAL NODE                READY   SUMMARY AGE   LARGEST FREE (CPU/MEM/PODS)   PROXIES   RUNNING   PENDING   REFUSALS (10M)',
      'ns/c1    admiralty-namespace-ns-c1   True    7s            3/4Gi/100                     3         1         1         NoNodeFits×4, DelegateNotPlaced×2 +1 more',
      'ns/c2    admiralty-namespace-ns-c2   False   ?             -                             0         0         0         -',
    ]);
    expect(text).to.include('  ns/c2 not ready: TargetUnreachable: connect ECONNREFUSED');
    expect(text).to.include('  ns/c2: no figures from the provider: the provider answered 403: Forbidden');
    expect(text).to.include('Provider leader: admiralty-7d9-x-1 (Lease admiralty/admiralty-provider, renewed 2s ago)');
    const wide = renderStatus(buildStatusReport(input(), NOW), true);
    expect(wide).to.match(/TOTAL FREE .* FAILOVER AFTER .*\n.*5\/6Gi\/200 .* 30s/);
    expect(wide).to.include(`  ns/c1 refused by filter 4× NoNodeFits, last at ${iso(NOW - 60_000)}: no node in ns/c1 fits: 1 Insufficient cpu (largest free 3)`);
    expect(wide).to.include(`  ns/c1 refused by bind 2× DelegateNotPlaced, last at ${iso(NOW - 30_000)}: ns/c1: 0/1 nodes are available`);
  });

  it('prints an explanation: each target passed with its score and why or failed with its reason, what the scores rank by, and where it would go', () => {
    const e: PodExplanation = {
      pod: 'ns/big',
      phase: 'Pending',
      targets: [
        {
          targetKey: 'Target/ns/c1',
          target: 'ns/c1',
          node: 'n1',
          passes: true,
          score: 10,
          why: 'fits on 2 of 3 node(s) of ns/c1; the most free on one of them: cpu 3, memory 4Gi',
          ranking: 'spread (the default): the most free cpu first',
        },
        { targetKey: 'Target/ns/c2', target: 'ns/c2', node: 'n2', passes: false, reason: 'no node in ns/c2 fits: 2 Insufficient cpu (largest free 500m)', unresolvable: false },
      ],
      best: ['ns/c1'],
    };
    expect(renderExplanation(e, false)).to.equal(
      [
        'Pod ns/big: Pending, not bound to a node',
        'TARGET   VERDICT   SCORE   REASON',
        'ns/c1    pass      10      fits on 2 of 3 node(s) of ns/c1; the most free on one of them: cpu 3, memory 4Gi',
        'ns/c2    fail      -       no node in ns/c2 fits: 2 Insufficient cpu (largest free 500m)',
        'Scored by spread (the default): the most free cpu first',
        'Would be bound to: ns/c1',
      ].join('\n'),
    );
    expect(renderExplanation({ ...e, best: [], boundTo: { node: 'n2', target: 'ns/c2' } }, false)).to.match(
      /^Pod ns\/big: Pending, bound to n2 \(target ns\/c2\)\n[\s\S]*No target can take it now\.$/,
    );
  });

  it('reads -o json, yaml and wide, refuses other formats, and prints ages as kubectl does', () => {
    expect(['json', 'yaml', 'wide', undefined].map(parseOutputFormat)).to.deep.equal(['json', 'yaml', 'wide', 'table']);
    expect(() => parseOutputFormat('name')).to.throw('unknown output format "name": use json, yaml or wide');
    expect([0, 45_000, 150_000, 3_600_000, 5 * 3_600_000, 72 * 3_600_000].map(formatAge)).to.deep.equal(['0s', '45s', '2m30s', '60m', '5h', '3d']);
    expect(renderTable(['A', 'B'], [['xx', 'y']])).to.equal('A    B\nxx   y');
  });

  it("impersonates the --as user with the context's own credentials", () => {
    const dir = mkdtempSync(join(tmpdir(), 'kc-'));
    try {
      const file = join(dir, 'config');
      writeFileSync(
        file,
        'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: admin, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: admin}}]\ncurrent-context: x\n',
      );
      const { kc } = loadOperatorKubeconfig({ kubeconfig: file, as: 'reader' }, {});
      expect(kc.getCurrentUser()).to.deep.include({ name: 'admin', token: 't', impersonateUser: 'reader' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--watch prints a new table each interval on a fake clock, a blank line between, and stops when signalled during the wait', async () => {
    const clock = new FakeClock(NOW);
    const stop = new AbortController();
    const printed: string[] = [];
    let reads = 0;
    const flush = () => new Promise<void>((res) => setImmediate(res));
    const done = printStatus({
      collect: async () => (reads++, input()),
      format: 'table',
      write: (t) => printed.push(t),
      clock,
      watchIntervalMs: 5000,
      signal: stop.signal,
    });
    await flush();
    expect([reads, printed.length]).to.deep.equal([1, 2]);
    clock.advance(4999);
    await flush();
    expect(reads, 'not before the interval').to.equal(1);
    clock.advance(1);
    await flush();
    expect(reads).to.equal(2);
    stop.abort();
    await done;
    expect(clock.pending(), 'the wait is cancelled').to.equal(0);
    expect(printed.filter((t) => t.startsWith('Cluster c1: 2 target(s)'))).to.have.length(2);
    expect(printed.filter((t) => t === '')).to.have.length(2);
    clock.advance(60_000);
    await flush();
    expect(reads, 'no read after the signal').to.equal(2);
  });

  it('without --watch prints once and sets no timer', async () => {
    const clock = new FakeClock(NOW);
    const printed: string[] = [];
    await printStatus({ collect: async () => input(), format: 'json', write: (t) => printed.push(t), clock });
    expect(printed).to.have.length(1);
    expect(JSON.parse(printed[0]!).cluster).to.equal('c1');
    expect(clock.pending()).to.equal(0);
  });
});
