import type { V1Container, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { isTerminal } from './resources.js';

/**
 * A port a pod holds on its node's own addresses, as kube-scheduler's NodePorts plugin keys it:
 * protocol (TCP when unset) and port, on one host IP, or on every one (`hostIP` left out, as
 * `0.0.0.0` or unset).
 */
export interface HostPort {
  port: number;
  protocol: string;
  hostIP?: string;
}

const EVERY_ADDRESS = '0.0.0.0';

/**
 * The host ports a pod holds on its node, as kube-scheduler counts them: those of its containers
 * and of its sidecars (init containers with `restartPolicy: Always`, which run as long as the
 * pod); other init containers are done before the pod runs. Pure.
 */
export function podHostPorts(spec: V1PodSpec | undefined): HostPort[] {
  const out: HostPort[] = [];
  const add = (c: V1Container) => {
    for (const p of c.ports ?? []) {
      if ((p.hostPort ?? 0) <= 0) continue;
      const hostIP = p.hostIP && p.hostIP !== EVERY_ADDRESS ? p.hostIP : undefined;
      out.push({ port: p.hostPort!, protocol: p.protocol || 'TCP', ...(hostIP ? { hostIP } : {}) });
    }
  };
  for (const c of spec?.initContainers ?? []) if (c.restartPolicy === 'Always') add(c);
  for (const c of spec?.containers ?? []) add(c);
  return out;
}

/**
 * The host ports the non-terminal pods bound to each node hold there, by node name, each node's
 * sorted (port, protocol, host IP) and without repeats: what a ClusterSummary writes of a node.
 * Nodes without any are left out. Pure.
 */
export function hostPortsByNode(pods: readonly V1Pod[]): Map<string, HostPort[]> {
  const byNode = new Map<string, Map<string, HostPort>>();
  for (const pod of pods) {
    const nodeName = pod.spec?.nodeName;
    if (!nodeName || isTerminal(pod)) continue;
    const ports = podHostPorts(pod.spec);
    if (ports.length === 0) continue;
    let held = byNode.get(nodeName);
    if (!held) byNode.set(nodeName, (held = new Map()));
    for (const p of ports) held.set(hostPortKey(p), p);
  }
  const out = new Map<string, HostPort[]>();
  for (const [node, held] of byNode) out.set(node, [...held.values()].sort(compare));
  return out;
}

/**
 * The host ports in use on one node, to check a pod's against: as kube-scheduler's NodePorts
 * does, a port asked for on every address conflicts with the same protocol and port on any
 * address, and one asked for on an address with the same on that address or on every address.
 */
export class UsedHostPorts {
  /** Host IP (`0.0.0.0`: every address) -> `protocol/port`. */
  private readonly byAddress = new Map<string, Set<string>>();

  constructor(ports: readonly HostPort[]) {
    for (const p of ports) {
      const ip = p.hostIP ?? EVERY_ADDRESS;
      let held = this.byAddress.get(ip);
      if (!held) this.byAddress.set(ip, (held = new Set()));
      held.add(`${p.protocol}/${p.port}`);
    }
  }

  /** Whether `wanted` holds no port that is in use here. */
  fits(wanted: readonly HostPort[]): boolean {
    return wanted.every((p) => !this.conflicts(p));
  }

  private conflicts(p: HostPort): boolean {
    const key = `${p.protocol}/${p.port}`;
    if (p.hostIP === undefined) {
      for (const held of this.byAddress.values()) if (held.has(key)) return true;
      return false;
    }
    return !!this.byAddress.get(EVERY_ADDRESS)?.has(key) || !!this.byAddress.get(p.hostIP)?.has(key);
  }
}

/** One key per host port (address, protocol, port), to count or set them apart. */
export function hostPortKey(p: HostPort): string {
  return `${p.hostIP ?? EVERY_ADDRESS}|${p.protocol}|${p.port}`;
}

function compare(a: HostPort, b: HostPort): number {
  if (a.port !== b.port) return a.port - b.port;
  if (a.protocol !== b.protocol) return a.protocol < b.protocol ? -1 : 1;
  const ai = a.hostIP ?? '';
  const bi = b.hostIP ?? '';
  return ai < bi ? -1 : ai > bi ? 1 : 0;
}
