import type { V1Pod } from '@kubernetes/client-node';
import { Gauge, Histogram, Registry } from 'prom-client';
import { json, text, type Answer, type Route, type RouteCall } from '../../provider/core/http-router.js';
import { errorFields } from '../../provider/core/logger.js';
import { parseUntrustedJson } from '../../provider/core/untrusted-json.js';
import type { ExtenderBindingArgs } from '../bind.js';
import { createExtenderContext, podKey, type ExtenderContext } from './context.js';
import { filter } from './filter.js';
import { preempt } from './preempt.js';
import { prioritize } from './prioritize.js';
import type { ExtenderArgs, ExtenderPreemptionArgs, ExtenderRoutesOptions } from './types.js';

/** URL prefix of the extender (the `urlPrefix` of kube-scheduler's extender config ends with it). */
export const EXTENDER_PATH_PREFIX = '/scheduler';
/** `filterVerb: filter`. */
export const FILTER_PATH = `${EXTENDER_PATH_PREFIX}/filter`;
/** `prioritizeVerb: prioritize`. */
export const PRIORITIZE_PATH = `${EXTENDER_PATH_PREFIX}/prioritize`;
/** `bindVerb: bind`. */
export const BIND_PATH = `${EXTENDER_PATH_PREFIX}/bind`;
/** `preemptVerb: preempt`. */
export const PREEMPT_PATH = `${EXTENDER_PATH_PREFIX}/preempt`;

/**
 * Most structural JSON tokens (`[`, `{`, `,`: see `UntrustedJsonLimits`) in an extender call.
 * Only the proxy scheduler reaches the parse (its client certificate is checked before the
 * body is read), so this is a backstop, sized for the 64 MiB body limit: Nodes with 20 labels
 * and 50 images have one token per 24 bytes, about 2.8 M in 64 MiB; 8 Mi leave room for
 * denser ones, and hold what 64 MiB could make `JSON.parse` build (43 M `[],`) to a fifth.
 */
export const EXTENDER_MAX_JSON_TOKENS = 8 * 2 ** 20;

/** Thrown by {@link parseExtenderArgs}; answered with HTTP 400 and this message. */
export class MalformedExtenderArgsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedExtenderArgsError';
  }
}

/**
 * The kube-scheduler extender's routes, for `createRouter`, with absolute paths: the provider
 * serves them on the webhook's server, behind the extender's client guard:
 *
 * * `POST /scheduler/filter`: `ExtenderArgs` in, `ExtenderFilterResult` out, in the form the
 *   nodes came in (`NodeNames` for `nodeCacheCapable: true`, else `Nodes`). Only our virtual nodes
 *   are judged, every other node is kept untouched. A virtual node is rejected when its target
 *   is unknown or not ready, or its cluster does not authorize us in the pod's namespace
 *   (`authorization`; all `FailedAndUnresolvableNodes`), when no summary of it was read yet or
 *   it refused this pod lately (`FailedNodes`), or when {@link fitsTarget} finds no real node for
 *   the delegate in its summary, less what was placed since (`FailedNodes` if some node lacked
 *   only resources, which preemption might free, else `FailedAndUnresolvableNodes`), unless the
 *   target's burst capacity, less what waits there already, can hold it; then by the pod's
 *   DoNotSchedule topology spread and required pod (anti-)affinity across targets
 *   (`topologyFilter`, unresolvable). The reason appears in the pod's FailedScheduling event.
 * * `POST /scheduler/prioritize`: `ExtenderArgs` in, `HostPriorityList` out: virtual nodes get
 *   {@link rankTargets} (0..10) by the pod's preferred node affinity first (`preferenceScore`:
 *   its own terms per fitting real node, the proxy's own against the virtual node's labels, from
 *   the call's Node or `virtualNodeLabels`; with its ScheduleAnyway spread and preferred pod
 *   (anti-)affinity added, `softTopologyScores`), then under the pod's policy ({@link placementPolicyOf}; an unusable
 *   annotation gets a Warning event `InvalidPlacementPolicy` on the pod, once per pod and
 *   replica); other nodes, and virtual nodes whose target is unknown, get 0. The target ranked
 *   first alone is remembered for the pod for {@link CHOSEN_TTL_MS}, so that weights count the
 *   pods kube-scheduler is about to bind there before their bind arrives.
 * * `POST /scheduler/preempt`: `ExtenderPreemptionArgs` in, `ExtenderPreemptionResult` out: on each
 *   candidate virtual node, the proxies whose delegates free one real node for the pod
 *   (`victimsOnOneNode`, with `proxiesOn` and `delegateOf`), or the node left out; other nodes
 *   keep kube-scheduler's victims.
 * * `POST /scheduler/bind` (with a `binder`): `ExtenderBindingArgs` in, `ExtenderBindingResult`
 *   out, answered once the target has placed the delegate or refused it (see `Binder`).
 *
 * A body that is not JSON, is JSON past the limits of `parseUntrustedJson` (nested deeper than
 * `DEFAULT_MAX_JSON_DEPTH`, more than {@link EXTENDER_MAX_JSON_TOKENS} tokens) or is not of the
 * expected shape gets HTTP 400 with the reason as text
 * (kube-scheduler then fails the call and tries the pod again later). Records
 * `admiralty_scheduler_extender_request_duration_seconds{verb,result}` (result: ok, refused,
 * bad_request, error) and logs malformed requests and internal errors once, here.
 */
export function createExtenderRoutes(opts: ExtenderRoutesOptions): Route[] {
  return extenderRoutes(createExtenderContext(opts));
}

/** The routes of {@link createExtenderRoutes} over an extender's context, with their request histogram. */
export function extenderRoutes(ctx: ExtenderContext): Route[] {
  const { opts, logger } = ctx;
  const duration = new Histogram({
    name: 'admiralty_scheduler_extender_request_duration_seconds',
    help: 'Time to answer one scheduler extender call, by verb (filter, prioritize, bind, preempt) and result (ok, refused, bad_request, error).',
    labelNames: ['verb', 'result'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5, 5, 10, 20],
    registers: [opts.metricsRegistry ?? new Registry()],
  });
  const plans = opts.gangs?.plans;
  if (plans) {
    new Gauge({
      name: 'admiralty_gangs',
      help: 'Gangs (pod groups placed all or nothing) by state: placing (a plan under way, its members being bound), holding (waiting for room, holding targets against smaller pods).',
      labelNames: ['state'] as const,
      registers: [opts.metricsRegistry ?? new Registry()],
      collect() {
        this.set({ state: 'placing' }, plans.size);
        this.set({ state: 'holding' }, plans.holding);
      },
    });
  }

  const handle =
    <A extends { Pod: V1Pod }>(verb: 'filter' | 'prioritize' | 'preempt', parse: (text: string) => A, answer: (args: A) => unknown) =>
    ({ body: raw }: RouteCall): Answer => {
      const end = duration.startTimer({ verb });
      let args: A;
      try {
        args = parse(raw.toString('utf8'));
      } catch (err) {
        end({ result: 'bad_request' });
        logger.warn(`scheduler extender: malformed ${verb} request`, errorFields(err));
        return text(400, (err as Error).message);
      }
      let body: unknown;
      try {
        body = answer(args);
      } catch (err) {
        end({ result: 'error' });
        logger.error(`scheduler extender: ${verb} failed`, { key: podKey(args.Pod), ...errorFields(err) });
        // kube-scheduler reads `Error` of a filter result into the pod's FailedScheduling event,
        // which the pod's owner reads: the exception's text stays in the provider's log.
        return json(500, verb === 'filter' ? { FailedNodes: {}, Error: 'internal error (see the provider log)' } : { Error: 'internal error' });
      }
      end({ result: 'ok' });
      return json(200, body);
    };

  const maxBodyBytes = opts.maxBodyBytes ?? 64 * 2 ** 20;
  const routes: Route[] = [
    { method: 'POST', path: FILTER_PATH, maxBodyBytes, handle: handle('filter', parseExtenderArgs, (args: ExtenderArgs) => filter(ctx, args)) },
    { method: 'POST', path: PRIORITIZE_PATH, maxBodyBytes, handle: handle('prioritize', parseExtenderArgs, (args: ExtenderArgs) => prioritize(ctx, args)) },
    { method: 'POST', path: PREEMPT_PATH, maxBodyBytes, handle: handle('preempt', parsePreemptionArgs, (args: ExtenderPreemptionArgs) => preempt(ctx, args)) },
  ];
  const binder = opts.binder;
  if (binder) {
    routes.push({
      method: 'POST',
      path: BIND_PATH,
      maxBodyBytes,
      handle: async ({ body: raw }) => {
        const end = duration.startTimer({ verb: 'bind' });
        let args: ExtenderBindingArgs;
        try {
          args = parseBindingArgs(raw.toString('utf8'));
        } catch (err) {
          end({ result: 'bad_request' });
          logger.warn('scheduler extender: malformed bind request', errorFields(err));
          return text(400, (err as Error).message);
        }
        const result = await binder.bind(args);
        end({ result: result.Error ? 'refused' : 'ok' });
        return json(200, result);
      },
    });
  }
  return routes;
}

/**
 * Parses and checks an `ExtenderArgs` body: `Pod` must be an object with a `spec`; at least one
 * of `Nodes` (an object whose `items`, possibly null, is an array of Nodes with names) and
 * `NodeNames` (an array of strings) must be present.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parseExtenderArgs(text: string): ExtenderArgs {
  const body = parseJsonObject(text, 'ExtenderArgs');
  const pod = body.Pod;
  if (!isObject(pod)) throw new MalformedExtenderArgsError('ExtenderArgs.Pod must be an object');
  if (!isObject(pod.spec)) throw new MalformedExtenderArgsError('ExtenderArgs.Pod.spec must be an object');
  const nodes = body.Nodes;
  const nodeNames = body.NodeNames;
  if ((nodes === undefined || nodes === null) && (nodeNames === undefined || nodeNames === null)) {
    throw new MalformedExtenderArgsError('ExtenderArgs must carry Nodes or NodeNames');
  }
  if (nodes !== undefined && nodes !== null) {
    if (!isObject(nodes)) throw new MalformedExtenderArgsError('ExtenderArgs.Nodes must be a NodeList object');
    const items = nodes.items;
    if (items !== undefined && items !== null && !Array.isArray(items)) throw new MalformedExtenderArgsError('ExtenderArgs.Nodes.items must be an array');
    (items ?? []).forEach((n: unknown, i: number) => {
      if (!isObject(n) || !isObject(n.metadata) || typeof n.metadata.name !== 'string' || n.metadata.name === '') {
        throw new MalformedExtenderArgsError(`ExtenderArgs.Nodes.items[${i}] must be a Node with metadata.name`);
      }
    });
  }
  if (nodeNames !== undefined && nodeNames !== null) {
    if (!Array.isArray(nodeNames) || nodeNames.some((n) => typeof n !== 'string' || n === '')) {
      throw new MalformedExtenderArgsError('ExtenderArgs.NodeNames must be an array of node names');
    }
  }
  return body as unknown as ExtenderArgs;
}

/**
 * Parses and checks an `ExtenderPreemptionArgs` body: `Pod` must be an object with a `spec`, and
 * `NodeNameToMetaVictims` (victims as `{UID}`) or `NodeNameToVictims` (victims as Pods with a UID)
 * an object of such victims by node name.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parsePreemptionArgs(text: string): ExtenderPreemptionArgs {
  const body = parseJsonObject(text, 'ExtenderPreemptionArgs');
  if (!isObject(body.Pod) || !isObject(body.Pod.spec)) throw new MalformedExtenderArgsError('ExtenderPreemptionArgs.Pod must be a Pod with a spec');
  const meta = body.NodeNameToMetaVictims;
  const whole = body.NodeNameToVictims;
  if (!isObject(meta) && !isObject(whole)) throw new MalformedExtenderArgsError('ExtenderPreemptionArgs must carry NodeNameToMetaVictims or NodeNameToVictims');
  for (const [field, map] of [
    ['NodeNameToMetaVictims', meta],
    ['NodeNameToVictims', whole],
  ] as const) {
    if (map === undefined || map === null) continue;
    if (!isObject(map)) throw new MalformedExtenderArgsError(`ExtenderPreemptionArgs.${field} must be an object`);
    for (const [node, victims] of Object.entries(map)) {
      const uids = isObject(victims) && Array.isArray(victims.Pods) ? victims.Pods.map((p: unknown) => (field === 'NodeNameToMetaVictims' ? (p as any)?.UID : (p as any)?.metadata?.uid)) : undefined;
      if (node === '' || !uids || uids.some((u: unknown) => typeof u !== 'string' || u === '')) {
        throw new MalformedExtenderArgsError(`ExtenderPreemptionArgs.${field}[${JSON.stringify(node)}] must list its Pods with UIDs`);
      }
    }
  }
  return body as unknown as ExtenderPreemptionArgs;
}

/**
 * Parses and checks an `ExtenderBindingArgs` body: `PodName`, `PodNamespace`, `PodUID` and `Node`
 * must be non-empty strings.
 *
 * @throws MalformedExtenderArgsError with a reason fit for the caller.
 */
export function parseBindingArgs(text: string): ExtenderBindingArgs {
  const body = parseJsonObject(text, 'ExtenderBindingArgs');
  for (const field of ['PodName', 'PodNamespace', 'PodUID', 'Node'] as const) {
    if (typeof body[field] !== 'string' || body[field] === '') throw new MalformedExtenderArgsError(`ExtenderBindingArgs.${field} must be a non-empty string`);
  }
  return { PodName: body.PodName, PodNamespace: body.PodNamespace, PodUID: body.PodUID, Node: body.Node };
}

/** The body as a JSON object within the limits of `parseUntrustedJson`, else MalformedExtenderArgsError naming `what` it should be. */
function parseJsonObject(text: string, what: string): Record<string, any> {
  let body: unknown;
  try {
    body = parseUntrustedJson(text, { maxTokens: EXTENDER_MAX_JSON_TOKENS });
  } catch (err) {
    throw new MalformedExtenderArgsError(`request body ${(err as Error).message}`);
  }
  if (!isObject(body)) throw new MalformedExtenderArgsError(`${what} must be a JSON object`);
  return body;
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
