import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Which addresses the provider may dial for a Target whose kubeconfig comes from a Secret.
 *
 * Whoever may write a Target and its Secret chooses the `server` URL, and the provider then
 * sends requests there from inside the cluster. Without a policy that is a server-side request
 * forgery primitive: the cloud metadata service (link-local), the provider's own listeners
 * (loopback, its pod IP) and anything else only the provider can reach. The policy is checked
 * twice: on the URL when the kubeconfig is parsed (literal IPs), and on every address DNS
 * returns when a connection is made (names, and names that change what they resolve to).
 *
 * Not covered, by design: private ranges (real targets live there) and in-cluster Service IPs
 * of this cluster. An egress NetworkPolicy on the provider is the tool for those.
 */
export interface ServerAddressPolicyOptions {
  /** Allow 127.0.0.0/8 and ::1: for local sandboxes where every cluster is on loopback. */
  allowLoopback: boolean;
  /** The provider's own non-loopback addresses (its pod IP); default: every interface's. */
  ownAddresses?: string[];
}

/** A connection to a Target's server was refused by the address policy. */
export class ServerAddressRefusedError extends Error {
  /** Node-style code, so the error reads like the other connection failures. */
  readonly code = 'EADDRREFUSEDBYPOLICY';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly why: string,
  ) {
    super(host === address ? `server address ${address} is not allowed: ${why}` : `server ${host} resolves to ${address}, which is not allowed: ${why}`);
    this.name = 'ServerAddressRefusedError';
  }
}

interface Rule {
  why: string;
  list: BlockList;
}

function rule(why: string, v4: Array<[string, number]>, v6: Array<[string, number]>): Rule {
  const list = new BlockList();
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6');
  return { why, list };
}

// BlockList also matches IPv4-mapped IPv6 forms (::ffff:169.254.169.254) against IPv4 rules.
const ALWAYS_REFUSED: Rule[] = [
  rule('it is an unspecified address', [['0.0.0.0', 8]], [['::', 128]]),
  rule(
    'it is link-local (cloud metadata services live there)',
    [['169.254.0.0', 16]],
    [
      ['fe80::', 10],
      ['64:ff9b::a9fe:0', 112],
    ],
  ),
  // Metadata services outside link-local: AWS over IPv6, Alibaba Cloud.
  rule('it is a cloud metadata address', [['100.100.100.200', 32]], [['fd00:ec2::254', 128]]),
  rule(
    'it is a multicast or broadcast address',
    [
      ['224.0.0.0', 4],
      ['255.255.255.255', 32],
    ],
    [['ff00::', 8]],
  ),
];
const LOOPBACK = rule('it is loopback (the provider itself); the operator did not allow loopback targets', [['127.0.0.0', 8]], [['::1', 128]]);

/** The addresses of this machine's interfaces that are not loopback. */
export function ownInterfaceAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && !i.internal)
    .map((i) => i!.address.replace(/%.*$/, ''));
}

/** See {@link ServerAddressPolicyOptions}. Immutable; one per process. */
export class ServerAddressPolicy {
  private readonly rules: Rule[];

  constructor(opts: ServerAddressPolicyOptions) {
    const own = new BlockList();
    for (const a of opts.ownAddresses ?? ownInterfaceAddresses()) {
      const family = isIP(a);
      if (family) own.addAddress(a, family === 4 ? 'ipv4' : 'ipv6');
    }
    this.rules = [...ALWAYS_REFUSED, ...(opts.allowLoopback ? [] : [LOOPBACK]), { why: "it is one of the provider's own addresses", list: own }];
  }

  /**
   * Why an IP address may not be dialled, or undefined if it may. Names are not resolved here.
   * An IPv6 address that carries an IPv4 one (IPv4-compatible, NAT64, 6to4) is judged by both:
   * a translator on the way may well deliver it to the IPv4 address inside.
   */
  refusal(address: string): string | undefined {
    const family = isIP(address);
    if (!family) return undefined;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    const why = this.rules.find((r) => r.list.check(address, type))?.why;
    if (why || family === 4) return why;
    const inner = embeddedIPv4(address);
    return inner === undefined ? undefined : this.rules.find((r) => r.list.check(inner, 'ipv4'))?.why;
  }

  /**
   * A drop-in for `dns.lookup` on an Agent: resolves as usual, then fails the connection if any
   * returned address is refused (all of them, so a name cannot hide one bad answer among good
   * ones). Honours `all: true`, which Node's happy-eyeballs connect asks for.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, options as LookupOptions, (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => {
      if (err) return callback(err, '', 0);
      const answers = Array.isArray(address) ? address : [{ address, family: family ?? 0 }];
      for (const a of answers) {
        const why = this.refusal(a.address);
        if (why) return callback(new ServerAddressRefusedError(hostname, a.address, why), '', 0);
      }
      (callback as (e: null, a: string | LookupAddress[], f?: number) => void)(null, address, family);
    });
  };
}

/** The eight 16-bit groups of a full IPv6 address. */
type Groups = [number, number, number, number, number, number, number, number];

const eightGroups = (g: number[]): g is Groups => g.length === 8;

/** The eight 16-bit groups of an IPv6 address that `isIP` accepted (a zone is dropped). */
function ipv6Groups(address: string): number[] {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    // The pattern has four groups, each of which matched.
    const [a, b, c, d] = dotted.slice(1, 5).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const part = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const front = part(head);
  const back = part(tail);
  return tail === undefined ? front : [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/**
 * The IPv4 address inside an IPv6 one, for the forms that route to it: IPv4-compatible
 * (`::a.b.c.d`, deprecated but still parsed), NAT64 (`64:ff9b::/96` and the local-use
 * `64:ff9b:1::/48`) and 6to4 (`2002:AABB:CCDD::/48`). IPv4-mapped addresses need no help:
 * BlockList already judges them by their IPv4 rules.
 */
export function embeddedIPv4(address: string): string | undefined {
  const g = ipv6Groups(address);
  if (!eightGroups(g)) return undefined;
  const quad = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 6) && (g[6] !== 0 || g[7] > 1)) return quad(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && (zeros(2, 6) || g[2] === 1)) return quad(g[6], g[7]);
  if (g[0] === 0x2002) return quad(g[1], g[2]);
  return undefined;
}
