/**
 * What fleetroll does with each compose-spec service field: the table
 * docs/compose.md shows and test/unit/compose.test.ts pins. The list is the
 * current compose-spec's `definitions.service.properties` (92 fields), so a
 * team's file is judged field by field and nothing is dropped without a word.
 *
 * - supported: mapped onto a fleet-file field (`to`)
 * - refused:   an error naming the field and `why`; the deploy does not start
 * - ignored:   a warning; only where the field cannot change what runs
 */
export type ComposeFieldStatus = 'supported' | 'refused' | 'ignored';

export interface ComposeFieldRule {
  field: string;
  status: ComposeFieldStatus;
  /** The fleet-file field it becomes (supported), e.g. `resources/memory`. */
  to?: string;
  why: string;
}

const S = (field: string, to: string, why = ''): ComposeFieldRule => ({ field, status: 'supported', to, why });
const R = (field: string, why: string): ComposeFieldRule => ({ field, status: 'refused', why });
const I = (field: string, why: string): ComposeFieldRule => ({ field, status: 'ignored', why });
const DCO = 'dockerCreateOptions';

export const COMPOSE_SERVICE_FIELDS: readonly ComposeFieldRule[] = [
  S('annotations', `${DCO}/HostConfig/Annotations`),
  I('attach', 'only chooses whose logs `docker compose up` prints'),
  R('blkio_config', 'not translated; set dockerCreateOptions.HostConfig.BlkioWeight / BlkioDeviceReadBps ... in the fleet file'),
  R('build', 'fleetroll deploys an image, it does not build one: build and tag the image first (docker build / compose build) and keep `image:`'),
  S('cap_add', 'capAdd'),
  S('cap_drop', 'capDrop'),
  S('cgroup', `${DCO}/HostConfig/CgroupnsMode`),
  S('cgroup_parent', `${DCO}/HostConfig/CgroupParent`),
  S('command', 'command'),
  S(
    'configs',
    'volumes',
    'a `file:` config becomes a read-only bind mount; `content:`, `environment:` and `external:` configs are refused (they would need a file written on every host)',
  ),
  R('container_name', 'fleetroll names every instance itself: one fixed name cannot hold several replicas or a surge instance beside the old one'),
  S('cpu_count', `${DCO}/HostConfig/CpuCount`),
  S('cpu_percent', `${DCO}/HostConfig/CpuPercent`),
  S('cpu_shares', `${DCO}/HostConfig/CpuShares`),
  S('cpu_quota', `${DCO}/HostConfig/CpuQuota`),
  S('cpu_period', `${DCO}/HostConfig/CpuPeriod`),
  S('cpu_rt_period', `${DCO}/HostConfig/CpuRealtimePeriod`),
  S('cpu_rt_runtime', `${DCO}/HostConfig/CpuRealtimeRuntime`),
  S('cpus', 'resources/cpus'),
  S('cpuset', `${DCO}/HostConfig/CpusetCpus`),
  R('credential_spec', 'a Windows gMSA setting, not translated; set dockerCreateOptions.HostConfig.SecurityOpt in the fleet file'),
  R('depends_on', 'fleetroll deploys one service; what it depends on must already run (start it with compose, or deploy it as its own fleet first)'),
  S(
    'deploy',
    'replicas, resources, restart, gpus',
    'replicas, resources and restart_policy map; update_config, rollback_config, placement, mode: global and generic_resources are refused (fleetroll has its own strategy and hosts); labels and endpoint_mode are ignored with a warning',
  ),
  I('develop', 'only `docker compose watch` reads it (file sync for development); it never changes the container'),
  S('device_cgroup_rules', `${DCO}/HostConfig/DeviceCgroupRules`),
  S('devices', 'devices'),
  S('dns', `${DCO}/HostConfig/Dns`),
  S('dns_opt', `${DCO}/HostConfig/DnsOptions`),
  S('dns_search', `${DCO}/HostConfig/DnsSearch`),
  S('domainname', `${DCO}/Domainname`),
  S('entrypoint', 'entrypoint'),
  S(
    'env_file',
    'envFile',
    'paths resolved against the compose file; `required: false` files that are missing are skipped with a warning; `format: raw` is refused',
  ),
  S('environment', 'env', 'a bare `KEY` takes its value from the environment (and .env), as compose does'),
  S('expose', 'port', 'a container port like `ports:` (see ports)'),
  R('extends', 'fleetroll does not merge service definitions across files: inline it, or share it with a YAML anchor (x-app: &app ... <<: *app)'),
  R('external_links', 'a legacy link to a container outside the project: put both on one network (networks:) and use its name'),
  S('extra_hosts', 'extraHosts'),
  S('gpus', 'gpus', '`all` or one entry with a count; device_ids, options and drivers other than nvidia are refused'),
  S('group_add', `${DCO}/HostConfig/GroupAdd`),
  S('healthcheck', 'healthcheck'),
  S('hostname', `${DCO}/Hostname`),
  S('image', 'image'),
  S('init', `${DCO}/HostConfig/Init`),
  S('ipc', `${DCO}/HostConfig/IpcMode`, "`service:`/`container:` are refused (they join another container's namespace)"),
  S('isolation', `${DCO}/HostConfig/Isolation`),
  S('labels', 'labels', 'fleetroll.* labels are refused (reserved)'),
  S('label_file', 'labels', 'read now; labels: wins over a label file'),
  R('links', 'a legacy link: fleetroll instances reach others through a network (networks:) by name'),
  S('logging', 'logging'),
  R('mac_address', 'every instance would carry the same MAC address on one network'),
  S('mem_limit', 'resources/memory'),
  S('mem_reservation', 'resources/memoryReservation'),
  S('mem_swappiness', `${DCO}/HostConfig/MemorySwappiness`),
  S('memswap_limit', `${DCO}/HostConfig/MemorySwap`),
  R('models', "compose's AI model provider (Docker Model Runner) is not something fleetroll starts"),
  R(
    'network_mode',
    'fleetroll attaches every instance to hosts[].network (and networks:) so nginx can reach each by address: host would make replicas fight over one port, none leaves them unreachable, service:/container: ties them to another container',
  ),
  S(
    'networks',
    'networks',
    'names resolved as compose does (<project>_<key> unless name:/external); aliases kept; fixed addresses (ipv4_address, ipv6_address, link_local_ips, mac_address) and interface_name/driver_opts are refused; priority is ignored with a warning',
  ),
  S('oom_kill_disable', `${DCO}/HostConfig/OomKillDisable`),
  S('oom_score_adj', `${DCO}/HostConfig/OomScoreAdj`),
  S('pid', `${DCO}/HostConfig/PidMode`, '`service:`/`container:` are refused'),
  S('pids_limit', 'resources/pidsLimit'),
  I('platform', 'fleetroll runs the image the engine resolves for its own platform; a mismatch fails at start, it is not hidden'),
  S(
    'ports',
    'port',
    'only the container port: `port` when exactly one TCP port; a fixed host port is refused (fleetroll publishes each instance itself, several per host); udp is refused (nginx routes HTTP)',
  ),
  R(
    'post_start',
    "per-container lifecycle hooks are run by compose itself; fleetroll has no per-container exec hooks (use the image's entrypoint or fleetroll hooks)",
  ),
  R('pre_stop', 'per-container lifecycle hooks are run by compose itself; fleetroll drains through nginx and then stops with stop_signal / stop_grace_period'),
  S('privileged', `${DCO}/HostConfig/Privileged`),
  I('profiles', 'profiles only choose which services `docker compose up` starts; fleetroll deploys the service it is named'),
  R('provider', 'the service is provided by a compose plugin, not a container fleetroll can run'),
  S('pull_policy', 'pull', 'always, missing (if_not_present) and never; build and refresh schedules (daily, weekly, every_<duration>) are refused'),
  R('pull_refresh_after', 'a pull refresh schedule: fleetroll pulls per deploy (pull: always | missing | never)'),
  S('read_only', 'readOnly'),
  S('restart', 'restart'),
  S('runtime', `${DCO}/HostConfig/Runtime`),
  S('scale', 'replicas'),
  S('security_opt', `${DCO}/HostConfig/SecurityOpt`),
  S('shm_size', 'shmSize'),
  S(
    'secrets',
    'secrets, secretFiles',
    'file and environment secrets; external (Swarm) secrets and drivers are refused; uid/gid/mode are ignored with a warning, as compose does for file secrets',
  ),
  S('sysctls', 'sysctls'),
  S('stdin_open', `${DCO}/OpenStdin`),
  S('stop_grace_period', 'terminationGracePeriodSeconds', 'whole seconds, rounded up'),
  S('stop_signal', 'stopSignal'),
  S('storage_opt', `${DCO}/HostConfig/StorageOpt`),
  S('tmpfs', 'tmpfs'),
  S('tty', `${DCO}/Tty`),
  S('ulimits', 'ulimits'),
  R('use_api_socket', 'mounts the Docker API socket and credentials into every instance; give it explicitly as a volume if it is really wanted'),
  S('user', 'user'),
  S('uts', `${DCO}/HostConfig/UTSMode`),
  S('userns_mode', `${DCO}/HostConfig/UsernsMode`),
  S(
    'volumes',
    'volumes',
    "short and long syntax; relative bind sources resolved against the compose file; named volumes get compose's names (<project>_<key> unless name:/external); npipe, cluster and image mounts and long-form options beyond read_only, volume.nocopy and tmpfs.size are refused",
  ),
  R('volumes_from', "mounts another container's volumes: name the volumes themselves (volumes:) so every instance gets them"),
  S('working_dir', 'workingDir'),
];

export const COMPOSE_FIELD_RULES: ReadonlyMap<string, ComposeFieldRule> = new Map(COMPOSE_SERVICE_FIELDS.map((r) => [r.field, r]));
