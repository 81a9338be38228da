import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { ELECT_ANNOTATION, PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION } from '../../../provider/core/keys.js';
import { silentLogger } from '../../../provider/core/logger.js';
import { createRouter } from '../../../provider/core/http-router.js';
import { createWebhookRoutes, MUTATE_MAX_JSON_TOKENS } from '../../../webhook/create-webhook-routes.js';
import { mutatePod } from '../../../webhook/mutate-pod.js';
import { INTERNAL_ERROR_MESSAGE } from '../../../webhook/review-admission.js';
import type { JsonPatchOp } from '../../../webhook/create-json-patch.js';

interface Reply {
  status: number;
  text: string;
  /** Only when the answer had one (none should: hashing every answer costs CPU for nothing). */
  etag?: string;
}

function review(overrides: Record<string, unknown> = {}, pod?: V1Pod): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'review-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'default',
      operation: 'CREATE',
      object: pod ?? electedPod(),
      ...overrides,
    },
  };
}

function electedPod(annotations: Record<string, string> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default', annotations: { [ELECT_ANNOTATION]: '', ...annotations } },
    spec: { containers: [{ name: 'web', image: 'nginx' }] },
  };
}

describe('webhook: createWebhookRoutes', () => {
  let server: http.Server;
  let port: number;
  let registry: Registry;
  let failWith: Error | undefined;

  before(async () => {
    registry = new Registry();
    const routes = createWebhookRoutes({
      logger: silentLogger(),
      registry,
      mutate: (pod) => {
        if (failWith) throw failWith;
        return mutatePod(pod);
      },
    });
    server = http.createServer(createRouter({ routes, logger: silentLogger() }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    failWith = undefined;
  });

  function send(method: string, path: string, body?: string | object, contentType = 'application/json'): Promise<Reply> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method, path, headers: payload ? { 'content-type': contentType } : {} }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ...(res.headers.etag ? { etag: res.headers.etag } : {}) }));
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  async function resultCounts(): Promise<Record<string, number>> {
    const metric = await registry.getSingleMetric('admiralty_webhook_request_duration_seconds')!.get();
    const counts: Record<string, number> = {};
    for (const v of metric.values) {
      if ((v as { metricName?: string }).metricName === 'admiralty_webhook_request_duration_seconds_count') counts[String(v.labels.result)] = v.value;
    }
    return counts;
  }

  it('answers /healthz', async () => {
    expect(await send('GET', '/healthz')).to.deep.equal({ status: 200, text: 'ok' });
  });

  it('round-trips an AdmissionReview with a base64 JSON patch that yields the proxy', async () => {
    const pod = electedPod();
    const reply = await send('POST', '/mutate', review({}, pod));
    expect(reply.status).to.equal(200);
    expect(reply.etag).to.equal(undefined);
    const body = JSON.parse(reply.text);
    expect(body.apiVersion).to.equal('admission.k8s.io/v1');
    expect(body.kind).to.equal('AdmissionReview');
    expect(body.response.uid).to.equal('review-1');
    expect(body.response.allowed).to.equal(true);
    expect(body.response.patchType).to.equal('JSONPatch');
    const ops = JSON.parse(Buffer.from(body.response.patch, 'base64').toString('utf8')) as JsonPatchOp[];
    const paths = ops.map((o) => o.path).sort();
    expect(paths).to.deep.equal(['/metadata/annotations/multicluster.admiralty.io~1sourcepod-manifest', '/metadata/finalizers', '/metadata/labels', '/spec/nodeSelector', '/spec/tolerations']);
    const nodeSelector = ops.find((o) => o.path === '/spec/nodeSelector') as { value: unknown };
    expect(nodeSelector.value).to.deep.equal({ 'virtual-kubelet.io/provider': 'admiralty' });
  });

  it('allows without a patch: unelected pods, reinvocation, UPDATE, other kinds', async () => {
    const unelected = { ...electedPod(), metadata: { name: 'plain' } };
    const proxy = mutatePod(electedPod()).pod;
    const cases = [
      review({}, unelected),
      review({}, proxy),
      review({ operation: 'UPDATE', oldObject: electedPod() }),
      review({ kind: { group: 'apps', version: 'v1', kind: 'Deployment' } }),
      review({ subResource: 'binding' }),
      review({ operation: 'DELETE', object: null }),
    ];
    for (const r of cases) {
      const reply = await send('POST', '/mutate', r);
      expect(reply.status).to.equal(200);
      const { response } = JSON.parse(reply.text);
      expect(response).to.deep.equal({ uid: 'review-1', allowed: true });
    }
  });

  it('echoes a v1beta1 review version', async () => {
    const reply = await send('POST', '/mutate', { ...review(), apiVersion: 'admission.k8s.io/v1beta1' });
    expect(JSON.parse(reply.text).apiVersion).to.equal('admission.k8s.io/v1beta1');
  });

  it('denies a pod with a malformed constraints annotation, with a 400 status and a clear message', async () => {
    const before = (await resultCounts()).denied ?? 0;
    const pod = electedPod({ [PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION]: 'nodeSelector: [' });
    const reply = await send('POST', '/mutate', review({}, pod));
    expect(reply.status).to.equal(200);
    const { response } = JSON.parse(reply.text);
    expect(response.uid).to.equal('review-1');
    expect(response.allowed).to.equal(false);
    expect(response.status.code).to.equal(400);
    expect(response.status.message).to.include(PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION);
    expect(response).to.not.have.property('patch');
    expect((await resultCounts()).denied).to.equal(before + 1);
  });

  it('refuses (never crashes) when the mutation throws unexpectedly', async () => {
    failWith = new TypeError('boom');
    const reply = await send('POST', '/mutate', review());
    expect(reply.status).to.equal(200);
    const { response } = JSON.parse(reply.text);
    expect(response.allowed).to.equal(false);
    expect(response.status.code).to.equal(500);
    // The exception's text stays in the log: the answer reaches whoever created the pod.
    expect(response.status.message).to.equal(INTERNAL_ERROR_MESSAGE).and.not.include('boom');
    expect(await send('GET', '/healthz')).to.deep.equal({ status: 200, text: 'ok' });
  });

  const malformed: Array<[string, string | object, RegExp]> = [
    ['a body that is not JSON', '{"apiVersion": ', /not JSON/],
    ['an empty body', '', /not JSON/],
    ['a JSON array', '[]', /not an AdmissionReview/],
    ['another kind', { apiVersion: 'v1', kind: 'Pod' }, /not an AdmissionReview/],
    ['a review without request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, /no request/],
    ['a request without uid', review({ uid: undefined }), /no uid/],
    ['a CREATE without object', review({ object: undefined }), /no object/],
    // Refused before JSON.parse builds them: unbounded, 8 MiB of `[` then `]` took 460 MiB.
    ['a review with a field nested 101 deep', JSON.stringify(review()).replace('"uid":', `"x":${'['.repeat(101)}${']'.repeat(101)},"uid":`), /^request body is nested deeper than 100 levels$/],
    [`more than ${MUTATE_MAX_JSON_TOKENS} JSON tokens`, `[${'[],'.repeat(MUTATE_MAX_JSON_TOKENS / 2)}[]]`, /^request body has more than 2097152 arrays, objects and items/],
  ];
  for (const [what, body, reason] of malformed) {
    it(`answers HTTP 400 to ${what}`, async () => {
      const before = (await resultCounts()).error ?? 0;
      const reply = await send('POST', '/mutate', body);
      expect(reply.status).to.equal(400);
      expect(reply.text).to.match(reason);
      expect((await resultCounts()).error).to.equal(before + 1);
    });
  }

  it('counts allowed reviews on the injected registry', async () => {
    const before = (await resultCounts()).allowed ?? 0;
    await send('POST', '/mutate', review());
    expect((await resultCounts()).allowed).to.equal(before + 1);
  });
});
