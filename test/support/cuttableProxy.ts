import net from 'node:net';

/** A TCP proxy on a fixed local port; cut() drops every connection and refuses new ones. */
export class CuttableProxy {
  private sockets = new Set<net.Socket>();
  private server?: net.Server;

  private constructor(private readonly host: string, private readonly targetPort: number, public port = 0) {}

  static async start(host: string, targetPort: number): Promise<CuttableProxy> {
    const proxy = new CuttableProxy(host, targetPort);
    await proxy.listen();
    return proxy;
  }

  private listen(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    this.server = server;
    return new Promise((resolve) => server.listen(this.port, '127.0.0.1', () => {
      this.port = (server.address() as net.AddressInfo).port;
      resolve();
    }));
  }

  cut(): void {
    this.server?.close();
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
  }

  /** Drops every connection, then accepts new ones and never answers them (a host that hangs). */
  blackhole(): void {
    this.cut();
    this.holdNewConnections();
  }

  /**
   * A network that stops passing anything, without closing: the connections stay open and carry
   * nothing either way, and new ones are accepted and never answered.
   */
  freeze(): void {
    for (const s of this.sockets) {
      s.unpipe();
      s.pause();
    }
    this.server?.close();
    this.holdNewConnections();
  }

  /** Listens again on the same port, accepting connections and never answering them. */
  private holdNewConnections(): void {
    const server = net.createServer((client) => {
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => undefined);
    });
    this.server = server;
    server.listen(this.port, '127.0.0.1');
  }

  restore(): Promise<void> {
    this.cut();
    return this.listen();
  }

  async close(): Promise<void> {
    this.cut();
  }
}
