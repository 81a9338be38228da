import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { CertKeyPair } from '../../certs/cert-types.js';

/** A server on 127.0.0.1 that takes only callers with a certificate of its CA. */
export interface MutualTlsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Starts an HTTPS server on 127.0.0.1 (any free port) serving `serving` and requiring a client
 * certificate signed by `ca`; each request is answered 200 with `body(cn)` as JSON, `cn` being
 * the common name of the caller's certificate.
 */
export async function startMutualTlsServer(ca: CertKeyPair, serving: CertKeyPair, body: (cn: string) => string): Promise<MutualTlsServer> {
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    const cn = String((req.socket as TLSSocket).getPeerCertificate().subject?.CN);
    res.writeHead(200, { 'content-type': 'application/json' }).end(body(cn));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
