/**
 * The kube-scheduler extender's front door: its public API, built in `extender/` (one module per
 * verb over a typed context, see `extender/context.ts`). Importers use this file, never those
 * modules, so that the cut between them can move.
 */
export { CHOSEN_TTL_MS } from './extender/context.js';
export { createExtender } from './extender/extender.js';
export { PREEMPTION_SETTLE_MS } from './extender/preempt.js';
export { MAX_EXTENDER_PRIORITY } from './extender/prioritize.js';
export {
  BIND_PATH,
  createExtenderRoutes,
  EXTENDER_MAX_JSON_TOKENS,
  EXTENDER_PATH_PREFIX,
  FILTER_PATH,
  MalformedExtenderArgsError,
  parseBindingArgs,
  parseExtenderArgs,
  parsePreemptionArgs,
  PREEMPT_PATH,
  PRIORITIZE_PATH,
} from './extender/routes.js';
export type {
  Extender,
  ExtenderArgs,
  ExtenderFilterResult,
  ExtenderPreemptionArgs,
  ExtenderPreemptionResult,
  ExtenderRoutesOptions,
  FilterRefusal,
  HostPriority,
  MetaVictims,
  TargetState,
  TargetStateSource,
  TargetVerdict,
} from './extender/types.js';
