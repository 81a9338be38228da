import { getJson } from '../e2e/support.js';

/** One row of the reliability table: what was done, what broke, and what came of it. */
export interface ReliabilityRow {
  scenario: string;
  load: string;
  faults: string;
  outcome: string;
  /** Proxies left without a Running delegate once the run converged (must be 0); NaN while unknown. */
  lost: number;
  /** Proxies with more than one live delegate, and delegates whose proxy is gone (must be 0); NaN while unknown. */
  duplicates: number;
}

const rows: ReliabilityRow[] = [];

/** What a scenario says of itself before it runs: the first three columns of its row. */
export type ScenarioHead = Pick<ReliabilityRow, 'scenario' | 'load' | 'faults'>;

/**
 * Runs a scenario's checks and records its row whether they pass or not, so that the table shows
 * a failing scenario too. `body` fills in the row's outcome and counts as it learns them; if it
 * throws, the row is recorded with `FAILED: <the error's first line>` before what the outcome
 * held so far, and with the counts of namespace `ns` at that moment if the body had not set
 * them; then the error goes on to mocha.
 */
export async function recorded(ns: string, head: ScenarioHead, body: (row: ReliabilityRow) => Promise<void>): Promise<void> {
  const row: ReliabilityRow = { ...head, outcome: '', lost: Number.NaN, duplicates: Number.NaN };
  try {
    await body(row);
  } catch (err) {
    const first = String((err as Error)?.message ?? err).split('\n')[0];
    row.outcome = `FAILED: ${first}${row.outcome ? `; ${row.outcome}` : ''}`;
    if (Number.isNaN(row.lost) || Number.isNaN(row.duplicates)) {
      const now = await account(ns).catch(() => undefined);
      if (now) Object.assign(row, tally(now, now.proxies));
    }
    throw err;
  } finally {
    rows.push(row);
  }
}

/**
 * The row's counts from an accounting, `expected` proxies wanted Running: lost are those without
 * exactly one Running delegate (missing, or not Running) that are not duplicated; duplicates are
 * proxies with more than one live delegate plus delegates whose proxy is gone.
 */
export function tally(a: Accounting, expected: number): Pick<ReliabilityRow, 'lost' | 'duplicates'> {
  return { lost: Math.max(0, expected - a.running - a.duplicated.length), duplicates: a.duplicated.length + a.orphans.length };
}

/** The table of every scenario that ran, one line each, as the suite prints it at its end. */
export function table(): string {
  const head: ReliabilityRow = { scenario: 'scenario', load: 'load', faults: 'faults', outcome: 'outcome', lost: 0, duplicates: 0 };
  const count = (n: number) => (Number.isNaN(n) ? '?' : String(n));
  const cells = (r: ReliabilityRow, isHead = false) => [r.scenario, r.load, r.faults, r.outcome, isHead ? 'lost' : count(r.lost), isHead ? 'duplicates' : count(r.duplicates)];
  const all = [cells(head, true), ...rows.map((r) => cells(r))];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((c) => c[i]!.length)));
  return all
    .map((c) =>
      c
        .map((v, i) => v.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** What a namespace's proxies and delegates add up to. */
export interface Accounting {
  /** Proxies not being deleted. */
  proxies: number;
  /** Of those, Running with exactly one Running delegate. */
  running: number;
  /** Proxies with no delegate at all. */
  lost: string[];
  /** Proxies with more than one live delegate. */
  duplicated: string[];
  /** Delegates whose proxy is gone. */
  orphans: string[];
}

const PARENT_UID = 'multicluster.admiralty.io/parent-uid';

/**
 * Counts, in namespace `ns`, c1's proxies against their delegates in c1 (self target) and c2,
 * matched by the delegates' parent-uid label. Terminating delegates are gone as far as a
 * duplicate is concerned: their containers are stopping.
 */
export async function account(ns: string): Promise<Accounting> {
  const proxies = (await getJson('c1', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/has-finalizer=true')).items.filter((p: any) => !p.metadata.deletionTimestamp);
  const delegates = [
    ...(await getJson('c1', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-cluster-name=c1,${PARENT_UID}`)).items,
    ...(await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-cluster-name=c1,${PARENT_UID}`)).items,
  ].filter((d: any) => !d.metadata.deletionTimestamp);
  const byParent = new Map<string, any[]>();
  for (const d of delegates) byParent.set(d.metadata.labels[PARENT_UID], [...(byParent.get(d.metadata.labels[PARENT_UID]) ?? []), d]);
  const allProxyUids = new Set((await getJson('c1', 'pods', '-n', ns, '-l', 'multicluster.admiralty.io/has-finalizer=true')).items.map((p: any) => p.metadata.uid));
  const out: Accounting = { proxies: proxies.length, running: 0, lost: [], duplicated: [], orphans: [] };
  for (const p of proxies) {
    const mine = byParent.get(p.metadata.uid) ?? [];
    if (mine.length === 0) out.lost.push(p.metadata.name);
    if (mine.length > 1) out.duplicated.push(p.metadata.name);
    if (mine.length === 1 && p.status?.phase === 'Running' && mine[0].status?.phase === 'Running') out.running++;
  }
  for (const [uid, ds] of byParent) if (!allProxyUids.has(uid)) out.orphans.push(...ds.map((d: any) => d.metadata.name));
  return out;
}
