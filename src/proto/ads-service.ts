import * as grpc from '@grpc/grpc-js';

export const ADS_SERVICE = 'envoy.service.discovery.v3.AggregatedDiscoveryService';
export const DELTA_ADS_PATH = `/${ADS_SERVICE}/DeltaAggregatedResources`;
export const SOTW_ADS_PATH = `/${ADS_SERVICE}/StreamAggregatedResources`;

const passBytes = (b: Buffer): Buffer => b;

/**
 * A method whose messages stay raw bytes on both sides: the handler decodes
 * requests itself (a malformed one fails only its own call, with a precise
 * status) and writes pre-encoded, shareable responses.
 */
export function rawMethod(path: string, streaming: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: streaming,
    responseStream: streaming,
    requestSerialize: passBytes,
    requestDeserialize: passBytes,
    responseSerialize: passBytes,
    responseDeserialize: passBytes,
  };
}

/**
 * The delta-ADS method with raw-bytes (de)serializers: servers write
 * pre-encoded responses and decode requests themselves, so a malformed message
 * fails only its own stream and shared response bytes are never re-encoded.
 */
export const deltaAdsMethod = rawMethod(DELTA_ADS_PATH, true);

export const deltaAdsServiceDefinition: grpc.ServiceDefinition = {
  DeltaAggregatedResources: deltaAdsMethod,
};

/** The state-of-the-world ADS method (gRPC's proxyless clients), raw bytes like the delta one. */
export const sotwAdsMethod = rawMethod(SOTW_ADS_PATH, true);

/** Both ADS methods, as the relay serves them. */
export const adsServiceDefinition: grpc.ServiceDefinition = {
  StreamAggregatedResources: sotwAdsMethod,
  DeltaAggregatedResources: deltaAdsMethod,
};

export function openSotwStream(client: grpc.Client, options?: grpc.CallOptions): grpc.ClientDuplexStream<Buffer, Buffer> {
  return client.makeBidiStreamRequest(SOTW_ADS_PATH, passBytes, passBytes, new grpc.Metadata(), options ?? {});
}

/** A client constructor for the delta-ADS method, speaking raw bytes. */
export const DeltaAdsClient = grpc.makeGenericClientConstructor(
  deltaAdsServiceDefinition as grpc.ServiceDefinition,
  ADS_SERVICE,
);

export function openDeltaStream(
  client: grpc.Client,
  options?: grpc.CallOptions,
): grpc.ClientDuplexStream<Buffer, Buffer> {
  return client.makeBidiStreamRequest(
    DELTA_ADS_PATH,
    passBytes,
    passBytes,
    new grpc.Metadata(),
    options ?? {},
  );
}
