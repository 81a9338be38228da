/**
 * A strict reader of the Prometheus text exposition format (0.0.4), for tests: it throws where
 * the upstream parsers refuse (prometheus/common's expfmt TextParser, prometheus's textparse
 * PromParser, which metrics-server uses), so a body it reads is one they read. Rules checked:
 * metric and label names; label values with only the `\\`, `\"`, `\n` escapes; no repeated label;
 * Go float values; integer millisecond timestamps; at most one HELP and one TYPE per family, the
 * TYPE before the family's first sample; a family's samples contiguous; no repeated series;
 * a trailing newline. A family is a metric name, except that the `_bucket`, `_sum` and `_count`
 * samples of a histogram (`_sum` and `_count` of a summary) belong to the family of its TYPE
 * line: clients write them label set by label set (prom-client, client_golang), and the parsers
 * read them so.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestampMs?: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|Inf|NaN)$/;
const INT64 = /^-?[0-9]{1,19}$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(body: string): { samples: Sample[]; types: Map<string, string> } {
  if (body.length > 0 && !body.endsWith('\n')) throw new Error('body does not end with a newline');
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const started = new Set<string>();
  const closed = new Set<string>();
  const series = new Set<string>();
  let current: string | undefined;
  const lines = body.split('\n').slice(0, -1);
  lines.forEach((line, i) => {
    const where = `line ${i + 1} ${JSON.stringify(line)}`;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (!m) return; // a plain comment
      // An empty name (the group always matches) fails the name check.
      const [, kind, name = '', rest = ''] = m;
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: invalid metric name`);
      if (kind === 'HELP') {
        if (helps.has(name)) throw new Error(`${where}: second HELP line for ${name}`);
        helps.add(name);
      } else {
        if (types.has(name)) throw new Error(`${where}: second TYPE line for ${name}`);
        if (started.has(name)) throw new Error(`${where}: TYPE line for ${name} after its first sample`);
        if (!TYPES.has(rest.trim())) throw new Error(`${where}: unknown type ${rest}`);
        types.set(name, rest.trim());
      }
      return;
    }
    const m = /^([^\s{]+)(\{[^]*\})?\s+(\S+)(?:\s+(\S+))?\s*$/.exec(line);
    if (!m) throw new Error(`${where}: not a sample`);
    // Empty defaults (the groups always match) fail the name and value checks.
    const [, name = '', rawLabels, rawValue = '', rawTs] = m;
    if (!METRIC_NAME.test(name)) throw new Error(`${where}: invalid metric name`);
    const family = familyOf(name, types);
    if (current !== family) {
      if (closed.has(family)) throw new Error(`${where}: samples of ${family} are not contiguous`);
      if (current) closed.add(current);
      current = family;
    }
    started.add(family);
    const labels = rawLabels ? parseLabels(rawLabels.slice(1, -1), where) : {};
    if (!FLOAT.test(rawValue)) throw new Error(`${where}: invalid value ${rawValue}`);
    if (rawTs !== undefined && !INT64.test(rawTs)) throw new Error(`${where}: invalid timestamp ${rawTs}`);
    const key = JSON.stringify([name, Object.entries(labels).sort()]);
    if (series.has(key)) throw new Error(`${where}: repeated series`);
    series.add(key);
    const value = /Inf$/.test(rawValue) ? (rawValue.startsWith('-') ? -Infinity : Infinity) : Number(rawValue);
    samples.push({ name, labels, value, ...(rawTs !== undefined ? { timestampMs: Number(rawTs) } : {}) });
  });
  return { samples, types };
}

/** The family a sample of `name` belongs to, given the TYPE lines read so far. */
function familyOf(name: string, types: ReadonlyMap<string, string>): string {
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (!m) return name;
  const type = types.get(m[1]!);
  return type === 'histogram' || (type === 'summary' && m[2] !== 'bucket') ? m[1]! : name;
}

function parseLabels(text: string, where: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const m = /^([^=\s]+)="/.exec(text.slice(i));
    if (!m) throw new Error(`${where}: bad label at ${i}`);
    const name = m[1]!;
    if (!LABEL_NAME.test(name)) throw new Error(`${where}: invalid label name ${name}`);
    if (name in out) throw new Error(`${where}: repeated label ${name}`);
    i += m[0].length;
    let value = '';
    for (;;) {
      if (i >= text.length) throw new Error(`${where}: unterminated label value`);
      const c = text[i];
      if (c === '"') break;
      if (c === '\n') throw new Error(`${where}: newline in label value`);
      if (c === '\\') {
        const e = text[i + 1];
        if (e === '\\' || e === '"') value += e;
        else if (e === 'n') value += '\n';
        else throw new Error(`${where}: invalid escape \\${e}`);
        i += 2;
        continue;
      }
      value += c;
      i++;
    }
    out[name] = value;
    i++;
    if (text[i] === ',') i++;
    else if (i < text.length) throw new Error(`${where}: expected , after label ${name}`);
  }
  return out;
}
