/**
 * Test backends for the real gRPC xDS client: tiny grpc-js servers on
 * 127.0.0.1 with one unary method, `/test.Echo/Whoami`, that answers with the
 * backend's own name. Raw bytes both ways, so no .proto is involved and the
 * client can tell which backend served a call.
 */
import * as grpc from '@grpc/grpc-js';

export const WHOAMI_PATH = '/test.Echo/Whoami';

const passBytes = (b: Buffer): Buffer => b;

export const whoamiMethod: grpc.MethodDefinition<Buffer, Buffer> = {
  path: WHOAMI_PATH,
  requestStream: false,
  responseStream: false,
  requestSerialize: passBytes,
  requestDeserialize: passBytes,
  responseSerialize: passBytes,
  responseDeserialize: passBytes,
};

export class EchoBackend {
  /** Calls served so far. */
  calls = 0;

  private constructor(
    readonly name: string,
    readonly port: number,
    private readonly server: grpc.Server,
  ) {}

  /** Listen on a free 127.0.0.1 port (or `port`, e.g. to bring a backend back). */
  static async start(name: string, port = 0): Promise<EchoBackend> {
    const server = new grpc.Server();
    let backend: EchoBackend | undefined;
    server.addService(
      { Whoami: whoamiMethod } as grpc.ServiceDefinition,
      {
        Whoami: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
          if (backend) backend.calls++;
          callback(null, Buffer.from(name, 'utf8'));
        },
      },
    );
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    backend = new EchoBackend(name, bound, server);
    return backend;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  stop(): void {
    this.server.forceShutdown();
  }
}
