/**
 * The four resources a gRPC xDS client walks for `xds:///SERVICE`, built as
 * Envoy typed JSON and encoded with the real Envoy protos (through the
 * relay's lazily loaded registry, src/typed-json/envoy-types.ts):
 *
 *   Listener  (api_listener: HttpConnectionManager, rds from ADS, router filter)
 *     → RouteConfiguration (one virtual host, domains ["*"], prefix "" → cluster)
 *       → Cluster (type EDS, eds_config from ADS, service_name, ROUND_ROBIN)
 *         → ClusterLoadAssignment (one locality with weight 1, 127.0.0.1:PORT…)
 *
 * What gRPC insists on (gRFC A27, and grpc-js-xds' validators): rds and eds
 * config sources must be `ads` (or `self`); the router must be the last HTTP
 * filter; a route needs a match with a path specifier; an xdstp Cluster needs
 * a non-empty eds service_name; a locality without load_balancing_weight is
 * ignored. gRPC reads a resource's name from the payload itself (Listener.name,
 * ClusterLoadAssignment.cluster_name …), so it must be exactly the name asked for.
 */
import { envoyTypes } from '../../src/typed-json/envoy-types';
import { CLUSTER, ENDPOINT, LISTENER, ROUTE, xdstp } from './names';

export const HTTP_CONNECTION_MANAGER =
  'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
export const ROUTER_FILTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

/** The name of each link of one service's chain. */
export interface ChainNames {
  listener: string;
  route: string;
  cluster: string;
  /** The ClusterLoadAssignment name (the Cluster's eds service_name). */
  endpoints: string;
}

/** Legacy (non-xdstp) names: `SERVICE`, `SERVICE-route`, `SERVICE-cluster`, `SERVICE-endpoints`. */
export function legacyChainNames(service: string): ChainNames {
  return {
    listener: service,
    route: `${service}-route`,
    cluster: `${service}-cluster`,
    endpoints: `${service}-endpoints`,
  };
}

/**
 * xdstp names under one authority. The Listener's is what grpc-js-xds derives
 * from `xds:///SERVICE` with the template `xdstp://AUTHORITY/envoy.config.listener.v3.Listener/%s`.
 */
export function xdstpChainNames(authority: string, service: string): ChainNames {
  return {
    listener: xdstp(authority, LISTENER, service),
    route: xdstp(authority, ROUTE, `${service}-route`),
    cluster: xdstp(authority, CLUSTER, `${service}-cluster`),
    endpoints: xdstp(authority, ENDPOINT, `${service}-endpoints`),
  };
}

type Json = Record<string, unknown>;

const ADS_SOURCE: Json = { ads: {}, resource_api_version: 'V3' };

export function listenerJson(name: string, routeName: string): Json {
  return {
    '@type': LISTENER,
    name,
    api_listener: {
      api_listener: {
        '@type': HTTP_CONNECTION_MANAGER,
        stat_prefix: 'grpc',
        rds: { route_config_name: routeName, config_source: ADS_SOURCE },
        http_filters: [{ name: 'router', typed_config: { '@type': ROUTER_FILTER } }],
      },
    },
  };
}

export function routeJson(name: string, clusterName: string): Json {
  return {
    '@type': ROUTE,
    name,
    virtual_hosts: [
      {
        name: 'all',
        domains: ['*'],
        routes: [{ match: { prefix: '' }, route: { cluster: clusterName } }],
      },
    ],
  };
}

export function clusterJson(name: string, edsServiceName: string): Json {
  return {
    '@type': CLUSTER,
    name,
    type: 'EDS',
    connect_timeout: '1s',
    lb_policy: 'ROUND_ROBIN',
    eds_cluster_config: { eds_config: ADS_SOURCE, service_name: edsServiceName },
  };
}

/** One locality (weight 1) holding an endpoint per port on 127.0.0.1. */
export function endpointsJson(name: string, ports: readonly number[]): Json {
  return {
    '@type': ENDPOINT,
    cluster_name: name,
    endpoints: [
      {
        locality: { region: 'test', zone: 'local' },
        load_balancing_weight: 1,
        lb_endpoints: ports.map((port) => ({
          endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } },
        })),
      },
    ],
  };
}

/** Envoy typed JSON (`{"@type": …}`) → the payload bytes of its `Any`. */
export function encodePayload(json: Json): Buffer {
  return envoyTypes().encodeAny(json).value;
}

export interface ChainResource {
  typeUrl: string;
  name: string;
  json: Json;
  /** The encoded message (an `Any`'s value). */
  payload: Buffer;
}

function resource(typeUrl: string, name: string, json: Json): ChainResource {
  return { typeUrl, name, json, payload: encodePayload(json) };
}

export function endpointsResource(names: ChainNames, ports: readonly number[]): ChainResource {
  return resource(ENDPOINT, names.endpoints, endpointsJson(names.endpoints, ports));
}

/** Listener, RouteConfiguration, Cluster and ClusterLoadAssignment (endpoints on `ports`), in that order. */
export function grpcChain(names: ChainNames, ports: readonly number[]): ChainResource[] {
  return [
    resource(LISTENER, names.listener, listenerJson(names.listener, names.route)),
    resource(ROUTE, names.route, routeJson(names.route, names.cluster)),
    resource(CLUSTER, names.cluster, clusterJson(names.cluster, names.endpoints)),
    endpointsResource(names, ports),
  ];
}

/** Anything resources can be put into, e.g. TestOrigin (delta; SotwOrigin versions per type and ignores `version`). */
export interface ResourceSink {
  setResource(typeUrl: string, name: string, payload: Buffer, version: string): void;
}

/** Put every resource of a chain into an origin, all at `version`. */
export function publish(sink: ResourceSink, resources: readonly ChainResource[], version: string): void {
  for (const r of resources) sink.setResource(r.typeUrl, r.name, r.payload, version);
}

/** The ports of a ClusterLoadAssignment in typed JSON (as CSDS returns it), in order. */
export function endpointPortsOf(json: Record<string, unknown> | undefined): number[] {
  type Lb = { endpoint?: { address?: { socket_address?: { port_value?: number } } } };
  const localities = (json?.endpoints as Array<{ lb_endpoints?: Lb[] }> | undefined) ?? [];
  return localities.flatMap((l) => (l.lb_endpoints ?? []).map((e) => e.endpoint?.address?.socket_address?.port_value ?? 0));
}
