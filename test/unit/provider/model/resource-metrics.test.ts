import { expect } from 'chai';
import { buildStatsSummary, parsePodMetricsList, POD_METRICS_LIMITS, renderResourceMetrics, type NodeUsage } from '../../../../provider/model/resource-metrics.js';
import { parsePrometheusText } from '../../../support/prometheus-text.js';

const T0 = Date.UTC(2026, 10, 23, 10, 0, 0);
const T1 = T0 + 15_500;

const usage: NodeUsage = {
  nodeName: 'admiralty-namespace-default-c2',
  startTimeMs: T0 - 3_600_000,
  timestampMs: T1 + 1_234,
  cpuNanoCores: 350_000_000,
  cpuCoreSeconds: 41.25,
  memoryWorkingSetBytes: 3 * 2 ** 20,
  pods: [
    {
      namespace: 'default',
      name: 'web-abc',
      uid: 'u1',
      startTimeMs: T0 - 60_000,
      containers: [
        { name: 'app', startTimeMs: T0 - 59_000, timestampMs: T1, cpuNanoCores: 250_000_000, cpuCoreSeconds: 30.5, memoryWorkingSetBytes: 2 ** 21 },
        { name: 'sidecar', startTimeMs: T0 - 59_000, timestampMs: T1, cpuNanoCores: 100_000_000, cpuCoreSeconds: 10.75, memoryWorkingSetBytes: 2 ** 20 },
      ],
    },
    { namespace: 'other', name: 'idle', uid: 'u2', containers: [] },
  ],
};

/**
 * What metrics-server v0.9.0's decodeBatch (pkg/scraper/client/resource/decode.go) takes from a
 * body, following its rules: series picked by name prefix, the container/pod/namespace labels
 * cut out of the raw series text by searching for `container="`, `pod="`, `namespace="` (no
 * unescaping), a node dropped when its CPU or memory is 0, a pod dropped when one of its
 * containers has 0 CPU or memory.
 */
function metricsServerDecode(body: string): { node?: { cpuNs: number; memory: number; ts: number }; pods: Map<string, Map<string, { cpuNs: number; memory: number; start?: number; ts: number }>> } {
  parsePrometheusText(body); // it would refuse what the text parser refuses
  const cut = (series: string, tag: string) => {
    const i = series.indexOf(tag) + tag.length;
    return series.slice(i, series.indexOf('"', i));
  };
  let node: { cpuNs: number; memory: number; ts: number } = { cpuNs: 0, memory: 0, ts: 0 };
  const pods = new Map<string, Map<string, { cpuNs: number; memory: number; start?: number; ts: number }>>();
  for (const line of body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [series, value, ts] = line.split(' ');
    const name = series!.split('{')[0]!;
    if (name === 'node_cpu_usage_seconds_total') node = { ...node, cpuNs: Math.trunc(Number(value) * 1e9), ts: Number(ts) };
    else if (name === 'node_memory_working_set_bytes') node = { ...node, memory: Number(value), ts: Number(ts) };
    else if (name.startsWith('container_') && ['container_cpu_usage_seconds_total', 'container_memory_working_set_bytes', 'container_start_time_seconds'].includes(name)) {
      const pod = `${cut(series!, 'namespace="')}/${cut(series!, 'pod="')}`;
      const containers = pods.get(pod) ?? new Map();
      pods.set(pod, containers);
      const c = containers.get(cut(series!, 'container="')) ?? { cpuNs: 0, memory: 0, ts: 0 };
      if (name === 'container_cpu_usage_seconds_total') Object.assign(c, { cpuNs: Math.trunc(Number(value) * 1e9), ts: Number(ts) });
      else if (name === 'container_memory_working_set_bytes') Object.assign(c, { memory: Number(value), ts: Number(ts) });
      else c.start = Number(value);
      containers.set(cut(series!, 'container="'), c);
    }
  }
  for (const [pod, containers] of pods) if ([...containers.values()].some((c) => c.cpuNs === 0 || c.memory === 0)) pods.delete(pod);
  return { node: node.cpuNs === 0 || node.memory === 0 ? undefined : node, pods };
}

describe('renderResourceMetrics', () => {
  it('writes a body the Prometheus text parsers accept, one HELP and TYPE per family', () => {
    const { types, samples } = parsePrometheusText(renderResourceMetrics(usage));
    expect(Object.fromEntries(types)).to.deep.equal({
      container_cpu_usage_seconds_total: 'counter',
      container_memory_working_set_bytes: 'gauge',
      container_start_time_seconds: 'gauge',
      node_cpu_usage_seconds_total: 'counter',
      node_memory_working_set_bytes: 'gauge',
      pod_cpu_usage_seconds_total: 'counter',
      pod_memory_working_set_bytes: 'gauge',
      resource_scrape_error: 'gauge',
    });
    expect(samples.find((s) => s.name === 'container_cpu_usage_seconds_total' && s.labels.container === 'app')).to.deep.equal({
      name: 'container_cpu_usage_seconds_total',
      labels: { container: 'app', namespace: 'default', pod: 'web-abc' },
      value: 30.5,
      timestampMs: T1,
    });
    expect(samples.find((s) => s.name === 'pod_memory_working_set_bytes')).to.deep.include({ labels: { namespace: 'default', pod: 'web-abc' }, value: 3 * 2 ** 20 });
    // A pod without figures is not written at all (metrics-server would drop it as incomplete).
    expect(samples.some((s) => s.labels.pod === 'idle')).to.equal(false);
  });

  it('gives metrics-server the node, every container, their start times, with millisecond timestamps', () => {
    const decoded = metricsServerDecode(renderResourceMetrics(usage));
    expect(decoded.node).to.deep.equal({ cpuNs: 41.25e9, memory: 3 * 2 ** 20, ts: T1 + 1_234 });
    expect([...decoded.pods.keys()]).to.deep.equal(['default/web-abc']);
    expect(Object.fromEntries(decoded.pods.get('default/web-abc')!)).to.deep.equal({
      app: { cpuNs: 30.5e9, memory: 2 ** 21, start: (T0 - 59_000) / 1000, ts: T1 },
      sidecar: { cpuNs: 10.75e9, memory: 2 ** 20, start: (T0 - 59_000) / 1000, ts: T1 },
    });
  });

  it('still writes a valid body for a node without proxies (metrics-server drops such a node quietly, as incomplete)', () => {
    const empty = { ...usage, pods: [], cpuNanoCores: 0, cpuCoreSeconds: 0, memoryWorkingSetBytes: 0 };
    const body = renderResourceMetrics(empty);
    expect(parsePrometheusText(body).samples.map((s) => s.name)).to.deep.equal(['node_cpu_usage_seconds_total', 'node_memory_working_set_bytes', 'resource_scrape_error']);
    expect(metricsServerDecode(body).node).to.equal(undefined);
  });

  it('escapes label values and never writes a non-finite value', () => {
    const odd: NodeUsage = { ...usage, cpuCoreSeconds: NaN, pods: [{ ...usage.pods[0]!, name: 'a"b\\c\nd' }] };
    const { samples } = parsePrometheusText(renderResourceMetrics(odd));
    expect(samples.find((s) => s.name === 'container_memory_working_set_bytes')!.labels.pod).to.equal('a"b\\c\nd');
    expect(samples.find((s) => s.name === 'node_cpu_usage_seconds_total')!.value).to.equal(0);
  });
});

describe('buildStatsSummary', () => {
  /** Go's encoding/json into stats/v1alpha1.Summary: uint64 fields take non-negative integers only, times RFC 3339. */
  const goUint64 = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  const rfc3339 = (v: unknown) => typeof v === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(v);

  it('writes the node and each proxy with CPU and memory, in the shapes and types the Go decoder reads', () => {
    const summary = JSON.parse(JSON.stringify(buildStatsSummary(usage)));
    expect(summary.node).to.deep.equal({
      nodeName: 'admiralty-namespace-default-c2',
      startTime: new Date(T0 - 3_600_000).toISOString(),
      cpu: { time: new Date(T1 + 1_234).toISOString(), usageNanoCores: 350_000_000, usageCoreNanoSeconds: 41_250_000_000 },
      memory: { time: new Date(T1 + 1_234).toISOString(), workingSetBytes: 3 * 2 ** 20 },
    });
    const pod = summary.pods[0];
    expect(pod.podRef).to.deep.equal({ name: 'web-abc', namespace: 'default', uid: 'u1' });
    expect(pod.containers.map((c: { name: string }) => c.name)).to.deep.equal(['app', 'sidecar']);
    expect(pod.cpu).to.deep.equal({ time: new Date(T1).toISOString(), usageNanoCores: 350_000_000, usageCoreNanoSeconds: 41_250_000_000 });
    expect(pod.memory.workingSetBytes).to.equal(3 * 2 ** 20);
    // Every number is a uint64, every time RFC 3339, in every object.
    const walk = (v: unknown, key = ''): void => {
      if (Array.isArray(v)) v.forEach((x) => walk(x));
      else if (v && typeof v === 'object') Object.entries(v).forEach(([k, x]) => walk(x, k));
      else if (typeof v === 'number') expect(goUint64(v), `${key}=${v}`).to.equal(true);
      else if (key === 'time' || key === 'startTime') expect(rfc3339(v), `${key}=${String(v)}`).to.equal(true);
    };
    walk(summary);
    expect(summary.pods[1]).to.deep.include({ containers: [] });
  });

  it('writes out-of-range figures as integers the decoder takes (never negative, fractional or in exponent form)', () => {
    const wild = { ...usage, cpuNanoCores: -5, cpuCoreSeconds: 1e30, memoryWorkingSetBytes: 1.5, pods: [] };
    const text = JSON.stringify(buildStatsSummary(wild));
    expect(text).not.to.match(/[0-9][eE][+-]?[0-9]/);
    const node = JSON.parse(text).node;
    expect([node.cpu.usageNanoCores, node.memory.workingSetBytes]).to.deep.equal([0, 2]);
    expect(Number.isSafeInteger(node.cpu.usageCoreNanoSeconds)).to.equal(true);
  });
});

describe('parsePodMetricsList', () => {
  const item = (name: string, containers: unknown[], extra: Record<string, unknown> = {}) => ({
    metadata: { name, namespace: 'default' },
    timestamp: '2026-11-23T10:00:15Z',
    window: '15.512s',
    containers,
    ...extra,
  });

  it("reads metrics-server's PodMetricsList: CPU in nanocores, memory in bytes, timestamp and window", () => {
    const body = {
      kind: 'PodMetricsList',
      apiVersion: 'metrics.k8s.io/v1beta1',
      items: [
        item('web-x', [
          { name: 'app', usage: { cpu: '250m', memory: '2048Ki' } },
          { name: 'side', usage: { cpu: '123456n', memory: '1Mi' } },
        ]),
      ],
    };
    expect(Object.fromEntries(parsePodMetricsList(body))).to.deep.equal({
      'web-x': {
        timestampMs: Date.UTC(2026, 10, 23, 10, 0, 15),
        windowMs: 15_512,
        containers: [
          { name: 'app', cpuNanoCores: 250_000_000, memoryWorkingSetBytes: 2 * 2 ** 20 },
          { name: 'side', cpuNanoCores: 123_456, memoryWorkingSetBytes: 2 ** 20 },
        ],
      },
    });
    expect(parsePodMetricsList({ items: [item('a', [], { window: '1m0s' })] }).get('a')!.windowMs).to.equal(60_000);
  });

  it('skips what is not well-formed instead of trusting it', () => {
    const ok = { name: 'app', usage: { cpu: '1m', memory: '1Mi' } };
    const body = {
      items: [
        item('Bad_Name', [ok]),
        item('huge', [{ name: 'app', usage: { cpu: '1e999999', memory: '1Mi' } }]),
        item('negative', [{ name: 'app', usage: { cpu: '-1', memory: '1Mi' } }]),
        item('no-time', [ok], { timestamp: 'yesterday' }),
        item('bad-window', [ok], { window: 'forever' }),
        item('bad-container', [{ name: 'a b', usage: { cpu: '1m', memory: '1Mi' } }]),
        item(
          'too-many',
          Array.from({ length: POD_METRICS_LIMITS.maxContainers + 1 }, (_, i) => ({ ...ok, name: `c${i}` })),
        ),
        item('not-a-list', 'x' as unknown as unknown[]),
        'not an object',
        item('good', [ok]),
        item('good', [{ name: 'app', usage: { cpu: '9', memory: '9' } }]),
      ],
    };
    const read = parsePodMetricsList(body);
    expect([...read.keys()]).to.deep.equal(['good']);
    expect(read.get('good')!.containers[0]!.cpuNanoCores).to.equal(1_000_000);
    expect(parsePodMetricsList({ items: 'x' }).size).to.equal(0);
    expect(parsePodMetricsList(null).size).to.equal(0);
  });

  it(`reads at most ${POD_METRICS_LIMITS.maxItems} items`, () => {
    const items = Array.from({ length: POD_METRICS_LIMITS.maxItems + 10 }, (_, i) => item(`p${i}`, []));
    expect(parsePodMetricsList({ items }).size).to.equal(POD_METRICS_LIMITS.maxItems);
  });
});
