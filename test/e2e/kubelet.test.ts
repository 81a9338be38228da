import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { join } from 'node:path';
import WebSocket from 'ws';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, kubectlStdin, providerCounter, sandbox, uniqueName, waitFor } from './support.js';

/** One HTTPS request to the provider's kubelet API; resolves with the status and body. */
function kubeletGet(path: string, opts: { token?: string; cert?: Buffer; key?: Buffer } = {}): Promise<{ status: number; body: string; peerIssuer: string }> {
  const ca = readFileSync(join(sandbox.dir, 'pki', 'ca.crt'));
  return new Promise((res, rej) => {
    const req = https.get(
      {
        host: '127.0.0.1',
        port: sandbox.ports('c1').kubelet,
        path,
        ca, // the serving certificate must chain to the cluster CA: proof that the CSR was signed
        checkServerIdentity: () => undefined,
        headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {},
        cert: opts.cert,
        key: opts.key,
      },
      (r) => {
        let body = '';
        const peerIssuer = String((r.socket as import('node:tls').TLSSocket).getPeerCertificate().issuer?.CN ?? '');
        r.on('data', (c) => (body += c));
        r.on('end', () => res({ status: r.statusCode ?? 0, body, peerIssuer }));
      },
    );
    req.on('error', rej);
  });
}

/** A CRI log line, as kwok reads them. */
const cri = (when: Date, text: string) => `${when.toISOString()} stdout F ${text}\n`;

describe('kubelet API of virtual nodes', function () {
  this.timeout(180_000);

  describe('security', () => {
    it('answers 401 without credentials and serves a certificate signed by the cluster CA', async () => {
      const r = await kubeletGet('/containerLogs/default/nope/app');
      expect(r.status).to.equal(401);
      expect(r.peerIssuer).to.equal('sandbox-ca');
    });

    it('answers 403 to a service account without rights on nodes', async () => {
      const ns = uniqueName('kl-auth');
      await kubectl('c1', 'create', 'namespace', ns);
      try {
        await kubectl('c1', 'create', 'serviceaccount', 'nobody', '-n', ns);
        const token = (await kubectl('c1', 'create', 'token', 'nobody', '-n', ns)).trim();
        const r = await kubeletGet(`/containerLogs/${ns}/nope/app`, { token });
        // Unknown pod: authorization is still checked first against the whole of nodes/proxy.
        expect(r.status).to.equal(403);
      } finally {
        await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
      }
    });

    it("lets the apiserver's kubelet client certificate through", async () => {
      const r = await kubeletGet('/containerLogs/default/nope/app', {
        cert: readFileSync(join(sandbox.dir, 'pki', 'kubelet-client.crt')),
        key: readFileSync(join(sandbox.dir, 'pki', 'kubelet-client.key')),
      });
      expect(r.status).to.equal(404);
    });
  });

  describe('logs, exec and attach through a proxy', () => {
    const ns = uniqueName('kl');
    let proxy = '';
    let delegate = '';
    let logFile = '';

    before(async () => {
      await connectNamespace(ns);
      proxy = 'web';
      await apply(
        'c1',
        `apiVersion: v1\nkind: Pod\nmetadata: {name: ${proxy}, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  containers: [{name: app, image: nginx}]\n`,
      );
      await waitFor('proxy Running', 90_000, async () => (await getJson('c1', 'pod', proxy, '-n', ns)).status?.phase === 'Running');
      const uid = (await getJson('c1', 'pod', proxy, '-n', ns)).metadata.uid;
      const delegates = await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${uid}`);
      expect(delegates.items).to.have.length(1);
      delegate = delegates.items[0].metadata.name;
      // What the delegate's container logs: an old line and two recent ones.
      const dir = join(sandbox.dir, 'c2', 'fake-logs');
      mkdirSync(dir, { recursive: true });
      logFile = join(dir, `${ns}.log`);
      const now = Date.now();
      writeFileSync(logFile, cri(new Date(now - 3600_000), 'an hour ago') + cri(new Date(now - 5_000), 'first') + cri(new Date(now - 1_000), 'second'));
      await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata: {name: ${delegate}, namespace: ${ns}}\nspec:\n  logs:\n  - logsFile: ${logFile}\n    follow: true\n`);
    });
    after(async () => {
      await disconnectNamespace(ns);
    });

    it('prints what the delegate logs, with --tail, --timestamps and --since as on a normal pod', async () => {
      expect(await kubectl('c1', 'logs', proxy, '-n', ns)).to.equal('an hour ago\nfirst\nsecond\n');
      expect(await kubectl('c1', 'logs', proxy, '-n', ns, '--tail=1')).to.equal('second\n');
      expect(await kubectl('c1', 'logs', proxy, '-n', ns, '--since=10m')).to.equal('first\nsecond\n');
      const stamped = await kubectl('c1', 'logs', proxy, '-n', ns, '--timestamps', '--tail=1');
      expect(stamped).to.match(/^\d{4}-\d\d-\d\dT[\d:.]+Z second\n$/);
      // The same as asking the target directly.
      expect(await kubectl('c1', 'logs', proxy, '-n', ns, '--tail=2')).to.equal(await kubectl('c2', 'logs', delegate, '-n', ns, '--tail=2'));
    });

    it('streams lines appended later with -f', async () => {
      const child = spawn(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c1', 'logs', '-f', '--tail=1', proxy, '-n', ns]);
      let out = '';
      child.stdout.on('data', (b) => (out += b));
      try {
        await waitFor('the last line', 20_000, () => out.includes('second'));
        appendFileSync(logFile, cri(new Date(), 'appended later'));
        await waitFor('the appended line', 20_000, () => out.includes('appended later'));
      } finally {
        child.kill();
      }
    });

    it('runs commands with their output, stderr and exit code, as exec on the delegate does', async () => {
      expect(await kubectl('c1', 'exec', proxy, '-n', ns, '--', 'sh', '-c', 'echo "out from $SANDBOX_CLUSTER"')).to.equal('out from c2\n');
      const both = await kubectlStdin('c1', '', 'exec', proxy, '-n', ns, '--', 'sh', '-c', 'echo to-stdout; echo to-stderr >&2');
      expect(both.stdout).to.equal('to-stdout\n');
      expect(both.stderr).to.include('to-stderr');
      const viaProxy = await kubectlStdin('c1', '', 'exec', proxy, '-n', ns, '--', 'sh', '-c', 'exit 3');
      const direct = await kubectlStdin('c2', '', 'exec', delegate, '-n', ns, '--', 'sh', '-c', 'exit 3');
      expect(viaProxy.code).to.not.equal(0);
      expect(viaProxy.code).to.equal(direct.code);
    });

    it('serves exec over a WebSocket (v5 channel protocol) to a client that dials the kubelet port directly', async () => {
      // What a client reaching a kubelet with WebSocket does; the apiserver's own kubelet-client
      // certificate authenticates it. The command really runs in the delegate (kwok, in c2).
      const ws = new WebSocket(
        `wss://127.0.0.1:${sandbox.ports('c1').kubelet}/exec/${ns}/${proxy}/app?command=sh&command=-c&command=${encodeURIComponent('echo "ws on $SANDBOX_CLUSTER"; exit 4')}&output=1&error=1`,
        ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
        {
          ca: readFileSync(join(sandbox.dir, 'pki', 'ca.crt')),
          cert: readFileSync(join(sandbox.dir, 'pki', 'kubelet-client.crt')),
          key: readFileSync(join(sandbox.dir, 'pki', 'kubelet-client.key')),
        },
      );
      const messages: Array<[number, string]> = [];
      ws.on('message', (d: Buffer) => messages.push([d[0]!, d.subarray(1).toString()]));
      const code = await new Promise<number>((res, rej) => {
        ws.once('close', (c) => res(c));
        ws.once('error', rej);
      });
      expect(ws.protocol).to.equal('v5.channel.k8s.io');
      expect(code).to.equal(1000);
      expect(
        messages
          .filter(([c]) => c === 1)
          .map(([, t]) => t)
          .join(''),
      ).to.equal('ws on c2\n');
      const outcome = JSON.parse(messages.find(([c]) => c === 3)![1]);
      // The target's Status, passed through: kwok reports a non-zero exit as an internal error
      // naming the exit status rather than as NonZeroExitCode.
      expect(outcome).to.include({ status: 'Failure' });
      expect(outcome.message).to.match(/exit status 4$/);
    });

    it('carries stdin: echo hi | kubectl exec -i', async () => {
      // kwok never closes a command's stdin on EOF, so use a command that ends by itself.
      const r = await kubectlStdin('c1', 'hi\n', 'exec', '-i', proxy, '-n', ns, '--', 'head', '-n', '1');
      expect(r).to.include({ stdout: 'hi\n', code: 0 });
    });

    it('gives kubectl exec -it a terminal: a tty, the window size and typed input', async () => {
      // `script` runs kubectl on a pseudo-terminal of its own, as a person's shell would.
      // The trailing sleep: kwok can drop a TTY command's last output if it exits at once
      // (seen on exec straight to the delegate too).
      // The target starts the command as soon as the exec connection opens, and the first
      // resize follows a few ms later (as through a real kubelet, with one hop more): wait for a
      // size before printing it, or a loaded machine prints the size of no window (0 0).
      const remote = `tty; for i in $(seq 50); do [ "$(stty size)" != "0 0" ] && break; sleep 0.1; done; stty size; read x; echo "got:$x"; sleep 0.5`;
      const line = `stty rows 40 cols 100; ${sandbox.kubectlPath} --kubeconfig ${sandbox.kubeconfigPath} --context c1 exec -it ${proxy} -n ${ns} -- sh -c '${remote}'`;
      const child = spawn('script', ['-qec', line, '/dev/null']);
      let out = '';
      child.stdout.on('data', (b) => (out += b));
      const exited = new Promise<number | null>((r) => child.on('close', r));
      try {
        // Type only once the remote shell waits for input: its window size is printed by then.
        await waitFor('the remote terminal size', 30_000, () => out.includes('40 100')).catch((err: Error) => {
          throw new Error(`${err.message}; the terminal showed:\n${out}`);
        });
        child.stdin.write('typed-by-hand\r');
        expect(await exited).to.equal(0);
      } finally {
        child.kill();
      }
      const lines = out.replace(/\0/g, '').split(/\r?\n/);
      expect(
        lines.some((l) => /^\/dev\/pts\/\d+$/.test(l)),
        `a pseudo-terminal in:\n${out}`,
      ).to.equal(true);
      expect(lines).to.include.members(['40 100', 'got:typed-by-hand']);
      // The terminal echoed what was typed, as a TTY does; a pipe would not.
      expect(lines).to.include('typed-by-hand');
    });

    it("attaches to the delegate's container: kubectl attach on the proxy, served by the provider, shows what the container writes once attached", async () => {
      // kwok serves attach by following a file as the container's output, from its end at the
      // moment of attaching; it reads no stdin, so input cannot be shown echoed here (the unit
      // tests of the kubelet API carry stdin and a terminal both ways).
      const attachFile = join(sandbox.dir, 'c2', 'fake-logs', `${ns}-attach.log`);
      writeFileSync(attachFile, '');
      await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Attach\nmetadata: {name: ${delegate}, namespace: ${ns}}\nspec:\n  attaches:\n  - containers: [app]\n    logsFile: ${attachFile}\n`);
      const attaches = async () => (await providerCounter('admiralty_kubelet_requests_total', 'route')).attach ?? 0;
      const attachesBefore = await attaches();
      const child = spawn(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c1', 'attach', proxy, '-n', ns, '-c', 'app']);
      let out = '';
      let err = '';
      child.stdout.on('data', (b) => (out += b));
      child.stderr.on('data', (b) => (err += b));
      // A line written before kubectl's stream is open is not shown, and when it opens is not
      // known from here: the container writes a numbered line every 500 ms until one shows.
      let written = 0;
      const writer = setInterval(() => appendFileSync(attachFile, cri(new Date(), `written while attached ${written++}`)), 500);
      try {
        await waitFor('a line the container wrote, shown by kubectl attach', 30_000, () => /written while attached \d+\n/.test(out)).catch((e: Error) => {
          throw new Error(`${e.message}; kubectl printed ${JSON.stringify(out)}, on stderr ${JSON.stringify(err)}`);
        });
      } finally {
        clearInterval(writer);
        child.kill();
      }
      // What it showed is the container's output, in the order written, and nothing else (the
      // complete lines: kubectl may have been stopped in the middle of one).
      const shown = out
        .split('\n')
        .slice(0, -1)
        .map((l) => Number(/^written while attached (\d+)$/.exec(l)?.[1] ?? NaN));
      expect(
        shown.every((n) => Number.isInteger(n) && n < written),
        `kubectl attach printed:\n${out}`,
      ).to.equal(true);
      expect(shown).to.deep.equal([...shown].sort((a, b) => a - b));
      // Served by the provider's kubelet API, the proxy's node's, which bridged it to c2; a
      // session is counted once it has ended, a moment after kubectl is stopped.
      await waitFor('the attach session counted by the provider', 20_000, async () => (await attaches()) > attachesBefore);
    });

    it('carries bytes both ways with kubectl port-forward', async () => {
      // An echo server on loopback stands for the container's port; kwok forwards to it.
      const conns = new Set<net.Socket>();
      const echo = net.createServer((c) => {
        conns.add(c);
        c.on('close', () => conns.delete(c));
        c.pipe(c);
      });
      await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
      const echoPort = (echo.address() as net.AddressInfo).port;
      await apply(
        'c2',
        `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: PortForward\nmetadata: {name: ${delegate}, namespace: ${ns}}\nspec:\n  forwards:\n  - ports: [8080]\n    target: {address: 127.0.0.1, port: ${echoPort}}\n`,
      );
      const child = spawn(sandbox.kubectlPath, ['--kubeconfig', sandbox.kubeconfigPath, '--context', 'c1', 'port-forward', '--address', '127.0.0.1', `pod/${proxy}`, '-n', ns, '0:8080']);
      let out = '';
      child.stdout.on('data', (b) => (out += b));
      try {
        await waitFor('port-forward listening', 20_000, () => /127\.0\.0\.1:(\d+)/.test(out));
        const localPort = Number(/127\.0\.0\.1:(\d+)/.exec(out)![1]);
        const payload = `ping ${Math.random()}\n`.repeat(1000);
        const got = await new Promise<string>((res, rej) => {
          let data = '';
          const s = net.connect(localPort, '127.0.0.1', () => s.write(payload));
          s.on('data', (d) => {
            data += d;
            if (data.length >= payload.length) {
              s.end();
              res(data);
            }
          });
          s.on('error', rej);
          setTimeout(() => rej(new Error(`only ${data.length} of ${payload.length} bytes came back`)), 15_000);
        });
        expect(got).to.equal(payload);
        // Once kubectl goes, the provider must close its own port-forward to the target: c2's
        // apiserver then counts no open portforward CONNECT. (kwok itself keeps its connection
        // to the container's port open, even for a port-forward made straight to c2.)
        child.kill();
        await waitFor('no port-forward left open in c2', 15_000, async () => {
          const metrics = await kubectl('c2', 'get', '--raw', '/metrics');
          const open = /^apiserver_longrunning_requests\{[^}]*subresource="portforward"[^}]*\} (\d+)/m.exec(metrics);
          return open !== null && open[1] === '0';
        });
      } finally {
        child.kill();
        // kwok may keep its side open after kubectl is gone: close every connection, or the
        // test process never exits.
        echo.close();
        for (const c of conns) c.destroy();
      }
    });

    it('works for an elected Deployment with kubectl logs deploy/<name>', async () => {
      await apply(
        'c1',
        `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: logger, namespace: ${ns}}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: logger}}\n  template:\n    metadata: {labels: {app: logger}, annotations: {multicluster.admiralty.io/elect: ""}}\n    spec:\n      nodeSelector: {topology.kubernetes.io/region: eu}\n      containers: [{name: app, image: nginx}]\n`,
      );
      await waitFor('deployment available', 90_000, async () => (await getJson('c1', 'deployment', 'logger', '-n', ns)).status?.availableReplicas === 1);
      const uid = (await getJson('c1', 'pods', '-n', ns, '-l', 'app=logger')).items[0].metadata.uid;
      const d = (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${uid}`)).items[0].metadata.name;
      await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata: {name: ${d}, namespace: ${ns}}\nspec:\n  logs:\n  - logsFile: ${logFile}\n`);
      expect(await kubectl('c1', 'logs', 'deploy/logger', '-n', ns, '--tail=1')).to.match(/\n$/);
    });
  });
});
