import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import { WebSocketServer } from 'ws';
import { createTargetPortForwardBackend } from '../../../../provider/kubelet/port-forward.js';

describe('target port-forward backend', () => {
  let wss: WebSocketServer | undefined;
  afterEach(async () => {
    for (const c of wss?.clients ?? []) c.terminate();
    await new Promise<void>((r) => (wss ? wss.close(() => r()) : r()));
    wss = undefined;
  });

  it("passes on a prefix of the target's error text, as one printable line", async () => {
    // The target's apiserver, played by a WebSocket server: on the error channel of port 80,
    // after the port prefix, 1 MiB of text with control characters.
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => 'v4.channel.k8s.io' });
    await once(wss, 'listening');
    wss.on('connection', (ws) => {
      ws.send(Buffer.from([1, 80, 0]));
      ws.send(Buffer.concat([Buffer.from([1]), Buffer.from(`refused\n\u001b[2J${'x'.repeat(1 << 20)}`)]));
      ws.close();
    });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 't', server: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'x' }],
      contexts: [{ name: 't', cluster: 't', user: 'u' }],
      currentContext: 't',
    });
    const upstream = await createTargetPortForwardBackend().portForward({ kubeConfig, namespace: 'ns', pod: 'p' }, 80, new AbortController().signal);
    upstream.resume();
    const [err] = (await once(upstream, 'error')) as [Error];
    expect(err.message).to.match(/^refused \[2Jx+…$/);
    expect(err.message).to.have.length(1024);
  });
});
