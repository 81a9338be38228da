/**
 * Hostile admission benchmark (a script, not a test): for each list or map of a pod that the
 * webhook walks, the time to answer one AdmissionReview of an elected pod as that list doubles,
 * from 8 items to its limit in `POD_LIST_LIMITS` (allowed: the whole mutation and its patch),
 * then past it (denied by `checkPodSize`) up to 6000 items, the size that froze the webhook
 * when tolerations were merged in quadratic time. Linear growth reads as a ratio near 2 from one
 * row to the next (near 1 while fixed costs dominate); quadratic as 4. Each field ends with the
 * exponents of least-squares fits of log(time) on log(n), over its allowed sizes and over its
 * denied ones: 1 or less is linear
 * (less while fixed costs weigh), 2 quadratic. Each point is the fastest of its repetitions, the
 * figure least moved by whatever else the machine runs.
 *
 * In process, on the main thread (`answerReview` with `mutatePod`, as each admission worker
 * runs it), so the figures are the algorithm's own, without TLS, HTTP or the worker's hop. The
 * baseline, in the same run: parsing the same body alone, which any webhook must do.
 *
 *   npx tsx test/bench/hostile-admission.ts [ms-per-point=60] [field-filter]
 */
import { performance } from 'node:perf_hooks';
import { ELECT_ANNOTATION } from '../../provider/core/keys.js';
import { parseUntrustedJson } from '../../provider/core/untrusted-json.js';
import { answerReview, MUTATE_MAX_JSON_TOKENS } from '../../webhook/answer-review.js';
import { POD_LIST_LIMITS } from '../../webhook/check-pod-size.js';
import { mutatePod } from '../../webhook/mutate-pod.js';

const usage = 'usage: hostile-admission [ms-per-point=60 (5 to 2000)] [field-filter]';
const msArg = process.argv[2] ?? '60';
if (!/^\d+$/.test(msArg) || Number(msArg) < 5 || Number(msArg) > 2000) {
  console.error(usage);
  process.exit(2);
}
const msPerPoint = Number(msArg);
const filter = process.argv[3] ?? '';

type Spec = Record<string, unknown>;
type Pod = { metadata: Record<string, unknown>; spec: Spec };

/** How to build a pod with `n` items in one list: the field's name in `POD_LIST_LIMITS` and a builder. */
interface Field {
  limit: keyof typeof POD_LIST_LIMITS;
  build(n: number): Pod;
}

const times = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
const entries = (n: number, prefix: string) => Object.fromEntries(times(n, (i) => [`${prefix}${i}`, `v${i}`]));
const container = (extra: Record<string, unknown> = {}, name = 'main') => ({ name, image: 'registry.example/app:1', resources: { requests: { cpu: '100m' } }, ...extra });
const pod = (spec: Spec = {}, metadata: Record<string, unknown> = {}): Pod => ({
  metadata: { name: 'hostile', namespace: 'bench', ...metadata, annotations: { [ELECT_ANNOTATION]: '', ...(metadata.annotations as object) } },
  spec: { containers: [container()], ...spec },
});
const expressions = (n: number) => times(n, (i) => ({ key: `k${i}`, operator: 'In', values: ['a'] }));
const selector = { matchLabels: { app: 'hostile' } };

const FIELDS: Field[] = [
  { limit: 'spec.tolerations', build: (n) => pod({ tolerations: times(n, (i) => ({ key: `k${i}`, operator: 'Exists', effect: 'NoSchedule' })) }) },
  { limit: 'spec.containers', build: (n) => pod({ containers: times(n, (i) => container({}, `c${i}`)) }) },
  { limit: 'spec.initContainers', build: (n) => pod({ initContainers: times(n, (i) => container({}, `i${i}`)) }) },
  { limit: 'spec.containers[*].env', build: (n) => pod({ containers: [container({ env: times(n, (i) => ({ name: `E${i}`, value: `v${i}` })) })] }) },
  { limit: 'spec.containers[*].envFrom', build: (n) => pod({ containers: [container({ envFrom: times(n, (i) => ({ configMapRef: { name: `cm${i}` } })) })] }) },
  { limit: 'spec.containers[*].ports', build: (n) => pod({ containers: [container({ ports: times(n, (i) => ({ containerPort: 1000 + i })) })] }) },
  {
    limit: 'spec.volumes',
    build: (n) =>
      pod({
        volumes: times(n, (i) => ({ name: `v${i}`, configMap: { name: `cm${i}` } })),
        containers: [container({ volumeMounts: times(Math.min(n, 512), (i) => ({ name: `v${i}`, mountPath: `/m/${i}` })) })],
      }),
  },
  { limit: 'spec.imagePullSecrets', build: (n) => pod({ imagePullSecrets: times(n, (i) => ({ name: `pull${i}` })) }) },
  { limit: 'spec.hostAliases', build: (n) => pod({ hostAliases: times(n, (i) => ({ ip: '127.0.0.1', hostnames: [`h${i}.local`] })) }) },
  {
    limit: 'spec.topologySpreadConstraints',
    build: (n) => pod({ topologySpreadConstraints: times(n, (i) => ({ maxSkew: 1, topologyKey: `k${i}`, whenUnsatisfiable: 'ScheduleAnyway', labelSelector: selector })) }),
  },
  { limit: 'spec.resourceClaims', build: (n) => pod({ resourceClaims: times(n, (i) => ({ name: `r${i}`, resourceClaimName: `claim${i}` })) }) },
  { limit: 'spec.nodeSelector', build: (n) => pod({ nodeSelector: entries(n, 'example.com/k') }) },
  { limit: 'metadata.labels', build: (n) => pod({}, { labels: entries(n, 'example.com/l') }) },
  {
    limit: 'spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms',
    build: (n) =>
      pod({
        affinity: {
          nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: times(n, (i) => ({ matchExpressions: expressions(1).map((e) => ({ ...e, key: `k${i}` })) })) } },
        },
      }),
  },
  {
    limit: 'spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution',
    build: (n) =>
      pod({
        affinity: {
          nodeAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: times(n, (i) => ({ weight: 1 + (i % 100), preference: { matchExpressions: [{ key: `k${i}`, operator: 'In', values: ['a'] }] } })),
          },
        },
      }),
  },
  {
    limit: 'spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution',
    build: (n) => pod({ affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: times(n, (i) => ({ topologyKey: `k${i}`, labelSelector: selector })) } } }),
  },
  {
    limit: 'selector[*].expressions',
    build: (n) => pod({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: expressions(n) }] } } } }),
  },
  {
    limit: 'selector[*].expressions[*].values',
    build: (n) =>
      pod({
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'In', values: times(n, (i) => `v${i}`) }] }] } } },
      }),
  },
  {
    limit: 'selector[*].matchLabels',
    build: (n) => pod({ topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: entries(n, 'example.com/m') } }] }),
  },
];

const review = (p: Pod) =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'hostile', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'bench', object: { apiVersion: 'v1', kind: 'Pod', ...p } },
  });

const mutate = (p: Parameters<typeof mutatePod>[0], namespace?: string) => mutatePod(p, { namespace, schedulerName: 'admiralty-proxy' });

/** Fastest time of `f`, in microseconds, over as many calls as fit in `ms` (15 at least). */
function fastest(ms: number, f: () => void): number {
  const samples: number[] = [];
  const until = performance.now() + ms;
  do {
    const started = performance.now();
    f();
    samples.push(performance.now() - started);
  } while (performance.now() < until || samples.length < 15);
  return Math.min(...samples) * 1000;
}

/** One review of `raw` and, as its baseline, the parse of the same body alone. */
function timeReview(raw: string): { us: number; parseUs: number; verdict: string } {
  let verdict = '';
  const us = fastest(msPerPoint, () => {
    const reply = answerReview(raw, mutate);
    const response = (reply.answer as { json?: { response?: { allowed?: boolean } } }).json?.response;
    verdict = reply.answer.status !== 200 ? `HTTP ${reply.answer.status}` : response?.allowed ? 'allowed' : 'denied';
  });
  const parseUs = fastest(msPerPoint / 3, () => parseUntrustedJson(raw, { maxTokens: MUTATE_MAX_JSON_TOKENS }));
  return { us, parseUs, verdict };
}

/** 8, 16, … up to the limit (the limit itself included), then doubling past it up to 6000, and at least three sizes past it. */
function sizes(limit: number): number[] {
  const out: number[] = [];
  for (let n = 8; n < limit; n *= 2) out.push(n);
  out.push(limit);
  for (let n = limit * 2; n < 6000 || n <= limit * 8; n *= 2) out.push(n);
  out.push(6000);
  return [...new Set(out)].sort((a, b) => a - b);
}

// Warm-up: JIT the whole path once before anything is timed.
for (const f of FIELDS) timeReview(review(f.build(8)));

const chosen = FIELDS.filter((f) => f.limit.includes(filter));
if (chosen.length === 0) {
  console.error(`no field matches "${filter}"; fields: ${FIELDS.map((f) => f.limit).join(', ')}`);
  process.exit(2);
}
console.log(`hostile-admission: one elected pod's review, in process, fastest of ${msPerPoint} ms of repetitions per point; ratio = time / time of the row before (the list doubled)`);
/** The slope of the least-squares line through (log n, log time). */
function exponent(points: { n: number; us: number }[]): number {
  const xs = points.map((p) => Math.log(p.n)),
    ys = points.map((p) => Math.log(p.us));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length,
    my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0,
    den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return num / den;
}

const exponents: { field: string; exponent: number }[] = [];
for (const f of chosen) {
  const limit = POD_LIST_LIMITS[f.limit];
  console.log(`\n${f.limit} (limit ${limit})`);
  let before: number | undefined;
  const points: { n: number; us: number; allowed: boolean }[] = [];
  for (const n of sizes(limit)) {
    const raw = review(f.build(n));
    const { us, parseUs, verdict } = timeReview(raw);
    const ratio = before === undefined ? undefined : us / before;
    points.push({ n, us, allowed: verdict === 'allowed' });
    const row = `  n=${String(n).padStart(5)}  ${(raw.length / 1024).toFixed(1).padStart(7)} KiB  review ${us.toFixed(1).padStart(9)} µs`;
    console.log(`${row}  ${ratio === undefined ? '      ' : `x${ratio.toFixed(2).padStart(5)}`}  parse alone ${parseUs.toFixed(1).padStart(8)} µs  ${verdict}`);
    before = us;
  }
  // Apart: a denial stops at the first list over its limit, so it costs less than the allowed
  // review just below it, and one line through both would hide either slope.
  const allowed = exponent(points.filter((p) => p.allowed)),
    denied = exponent(points.filter((p) => !p.allowed));
  exponents.push({ field: f.limit, exponent: Math.max(allowed, denied) });
  console.log(`  growth exponent: allowed ${allowed.toFixed(2)}, denied ${denied.toFixed(2)}`);
}
const worst = exponents.reduce((a, b) => (b.exponent > a.exponent ? b : a));
console.log(`\nhostile-admission: ${exponents.length} fields, largest growth exponent ${worst.exponent.toFixed(2)} (${worst.field}); linear is at most 1, quadratic 2`);
