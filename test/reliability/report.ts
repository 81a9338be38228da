import { getJson } from '../e2e/support.js';

/** One row of the reliability table: what was done, what broke, and what came of it. */
export interface ReliabilityRow {
  scenario: string;
  load: string;
  faults: string;
  outcome: string;
  /** Proxies left without a Running delegate once the run converged (must be 0). */
  lost: number;
  /** Proxies with more than one live delegate, and delegates whose proxy is gone (must be 0). */
  duplicates: number;
}

const rows: ReliabilityRow[] = [];

export function record(row: ReliabilityRow): void {
  rows.push(row);
}

/** The table of every scenario that ran, one line each, as the suite prints it at its end. */
export function table(): string {
  const head: ReliabilityRow = { scenario: 'scenario', load: 'load', faults: 'faults', outcome: 'outcome', lost: 0, duplicates: 0 };
  const cells = (r: ReliabilityRow, isHead = false) => [r.scenario, r.load, r.faults, r.outcome, isHead ? 'lost' : String(r.lost), isHead ? 'duplicates' : String(r.duplicates)];
  const all = [cells(head, true), ...rows.map((r) => cells(r))];
  const widths = all[0].map((_, i) => Math.max(...all.map((c) => c[i].length)));
  return all.map((c) => c.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd()).join('\n');
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
