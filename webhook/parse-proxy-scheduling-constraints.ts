import type { V1Affinity, V1Toleration, V1TopologySpreadConstraint } from '@kubernetes/client-node';
import { ValidationError } from '../provider/core/errors.js';
import { PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION } from '../provider/core/keys.js';
import { parseUntrustedYaml, UntrustedYamlError } from '../provider/core/untrusted-yaml.js';

/** Largest constraints annotation we parse; real ones are a few hundred bytes. */
const MAX_CONSTRAINTS_BYTES = 16 * 1024;

/** The PodSpec fragment a user may put in the proxy-pod-scheduling-constraints annotation. */
export interface ProxySchedulingConstraints {
  nodeSelector?: Record<string, string>;
  tolerations?: V1Toleration[];
  affinity?: V1Affinity;
  topologySpreadConstraints?: V1TopologySpreadConstraint[];
}

// A tiny strict schema of the accepted fragment, so that a typo (`nodeselector`,
// `tolerationseconds`) is refused with its path instead of being silently ignored, as a strict
// Go unmarshal into PodSpec would. Enum values are left to the apiserver's pod validation,
// which runs on the mutated proxy.
type Schema = 'string' | 'integer' | { map: Schema } | { array: Schema } | { object: Record<string, Schema>; required?: readonly string[] };

const strings: Schema = { array: 'string' };
const labelSelector: Schema = {
  object: {
    matchLabels: { map: 'string' },
    matchExpressions: { array: { object: { key: 'string', operator: 'string', values: strings }, required: ['key', 'operator'] } },
  },
};
const nodeSelectorRequirement: Schema = { object: { key: 'string', operator: 'string', values: strings }, required: ['key', 'operator'] };
const nodeSelectorTerm: Schema = { object: { matchExpressions: { array: nodeSelectorRequirement }, matchFields: { array: nodeSelectorRequirement } } };
const podAffinityTerm: Schema = {
  object: {
    labelSelector,
    namespaceSelector: labelSelector,
    namespaces: strings,
    topologyKey: 'string',
    matchLabelKeys: strings,
    mismatchLabelKeys: strings,
  },
  required: ['topologyKey'],
};
const podAffinity: Schema = {
  object: {
    requiredDuringSchedulingIgnoredDuringExecution: { array: podAffinityTerm },
    preferredDuringSchedulingIgnoredDuringExecution: {
      array: { object: { weight: 'integer', podAffinityTerm }, required: ['weight', 'podAffinityTerm'] },
    },
  },
};
const constraintsSchema: Schema = {
  object: {
    nodeSelector: { map: 'string' },
    tolerations: {
      array: { object: { key: 'string', operator: 'string', value: 'string', effect: 'string', tolerationSeconds: 'integer' } },
    },
    affinity: {
      object: {
        nodeAffinity: {
          object: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              object: { nodeSelectorTerms: { array: nodeSelectorTerm } },
              required: ['nodeSelectorTerms'],
            },
            preferredDuringSchedulingIgnoredDuringExecution: {
              array: { object: { weight: 'integer', preference: nodeSelectorTerm }, required: ['weight', 'preference'] },
            },
          },
        },
        podAffinity,
        podAntiAffinity: podAffinity,
      },
    },
    topologySpreadConstraints: {
      array: {
        object: {
          maxSkew: 'integer',
          topologyKey: 'string',
          whenUnsatisfiable: 'string',
          labelSelector,
          minDomains: 'integer',
          nodeAffinityPolicy: 'string',
          nodeTaintsPolicy: 'string',
          matchLabelKeys: strings,
        },
        required: ['maxSkew', 'topologyKey', 'whenUnsatisfiable'],
      },
    },
  },
};

/**
 * Parses the value of the `multicluster.admiralty.io/proxy-pod-scheduling-constraints`
 * annotation: YAML (or JSON) of a PodSpec fragment with `nodeSelector`, `tolerations`,
 * `affinity` and `topologySpreadConstraints`. Strict: duplicate keys, unknown fields, wrong
 * types and several documents are refused. `null` values count as absent; an empty value means
 * no constraints. Pure.
 *
 * @throws ValidationError whose message names the annotation and the offending path.
 */
export function parseProxySchedulingConstraints(text: string): ProxySchedulingConstraints {
  let doc: unknown;
  try {
    doc = parseUntrustedYaml(text, { maxBytes: MAX_CONSTRAINTS_BYTES });
  } catch (err) {
    if (!(err instanceof UntrustedYamlError)) throw err;
    throw new ValidationError(`annotation ${PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION} is ${err.message}`, { cause: err });
  }
  if (doc === null || doc === undefined) return {};
  return check(doc, constraintsSchema, '') as ProxySchedulingConstraints;
}

function fail(path: string, what: string): never {
  throw new ValidationError(`annotation ${PROXY_POD_SCHEDULING_CONSTRAINTS_ANNOTATION}: ${path || 'the value'} ${what}`);
}

/** Checks `value` against `schema` and returns it with `null` members dropped. */
function check(value: unknown, schema: Schema, path: string): unknown {
  if (schema === 'string') {
    if (typeof value !== 'string') fail(path, `must be a string, got ${describe(value)}`);
    return value;
  }
  if (schema === 'integer') {
    if (typeof value !== 'number' || !Number.isInteger(value)) fail(path, `must be an integer, got ${describe(value)}`);
    return value;
  }
  if ('array' in schema) {
    if (!Array.isArray(value)) fail(path, `must be a list, got ${describe(value)}`);
    return value.map((item, i) => check(item, schema.array, `${path}[${i}]`));
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(path, `must be a mapping, got ${describe(value)}`);
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    const memberPath = path ? `${path}.${key}` : key;
    if ('map' in schema) {
      out[key] = check(member, schema.map, memberPath);
      continue;
    }
    // Own keys only: `toString`, `constructor` or `__proto__` are no fields, whatever the
    // schema object inherits.
    const memberSchema = Object.hasOwn(schema.object, key) ? schema.object[key] : undefined;
    if (!memberSchema) fail(memberPath, `is not a supported field (expected one of: ${Object.keys(schema.object).join(', ')})`);
    if (member === null) continue;
    out[key] = check(member, memberSchema, memberPath);
  }
  if ('object' in schema) {
    for (const key of schema.required ?? []) {
      if (out[key] === undefined) fail(path ? `${path}.${key}` : key, 'is required');
    }
  }
  return out;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `${typeof value} ${JSON.stringify(value)}`;
}

/**
 * {@link parseProxySchedulingConstraints} with a memory of the last `size` texts it parsed: the
 * pods of one workload carry the same annotation, and parsing it as YAML is the costliest step
 * of admitting one (about a millisecond). Each call returns a fresh copy, which the caller may
 * change; a text that is refused is parsed again each time (and refused again). Owned by one
 * set of webhook routes.
 */
export function rememberingConstraintsParser(size = 64): (text: string) => ProxySchedulingConstraints {
  const parsed = new Map<string, ProxySchedulingConstraints>();
  return (text) => {
    let constraints = parsed.get(text);
    if (constraints) {
      parsed.delete(text); // re-insert: Map order is use order
    } else {
      constraints = parseProxySchedulingConstraints(text);
      if (parsed.size >= size) parsed.delete(parsed.keys().next().value!);
    }
    parsed.set(text, constraints);
    return structuredClone(constraints);
  };
}
