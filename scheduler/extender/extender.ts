import type { V1Pod } from '@kubernetes/client-node';
import { createExtenderContext } from './context.js';
import { explain } from './explain.js';
import { extenderRoutes } from './routes.js';
import type { Extender, ExtenderRoutesOptions, TargetVerdict } from './types.js';

/** {@link createExtenderRoutes}, with {@link Extender.explain} beside the routes. */
export function createExtender(opts: ExtenderRoutesOptions): Extender {
  const ctx = createExtenderContext(opts);
  return { routes: extenderRoutes(ctx), explain: (pod: V1Pod): TargetVerdict[] => explain(ctx, pod) };
}
