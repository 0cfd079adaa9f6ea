//! The documents used when the NodeClass's templates Secret has no (or an empty) key, with
//! the keys and meaning of upstream's defaults (`userdata.go`, `metadata.go`, `network.go` in
//! `pkg/providers/instance/cloudinit/`):
//!
//! * [`USER_DATA`]: the guest agent installed and started, a `karpenter` sudo user (with the
//!   values Secret's comma-separated `SSHAuthorizedKeys`), the 2 MiB huge pages reserved and
//!   every template value written to `/etc/karpenter.yaml` (readable by root only here:
//!   it carries the bootstrap token);
//! * [`META_DATA`]: hostname, instance id and type, provider id, region and zone;
//! * [`NETWORK_V2`], the default `network-config`: each interface matched by MAC, with its
//!   MTU, DHCP, static addresses and default routes, the SLAAC address and the node's router
//!   when the interface autoconfigures on a bridge whose node address is known, and the DNS
//!   settings; [`NETWORK_V1`] says the same in cloud-init's version 1 format.
//!
//! `vendor-data` has no default: without the key the ISO carries none.

/// The default `user-data`, rendered with [`crate::cloudinit::values::UserDataValues`].
pub const USER_DATA: &str = r#"#cloud-config
hostname: {{ .Metadata.Hostname }}
manage_etc_hosts: true
package_update: true
packages:
  - qemu-guest-agent
runcmd:
  - [systemctl, enable, --now, qemu-guest-agent.service]

users:
  - name: karpenter
    gecos: Kubernetes User
    groups: [users]
    shell: /bin/bash
    sudo: ALL=(ALL) NOPASSWD:ALL
{{- $keys := get .Values "SSHAuthorizedKeys" }}
{{- if $keys }}
    ssh_authorized_keys:
{{- range split $keys "," }}
      - {{ quote . }}
{{- end }}
{{- end }}

write_files:
{{- if .Resources.Hugepages2Mi }}
  - path: /etc/sysctl.d/99-hugepages.conf
    content: |
      vm.nr_hugepages = {{ .Resources.Hugepages2Mi }}
{{- end }}
  - path: /etc/karpenter.yaml
    owner: root:root
    permissions: "0600"
    content: |
{{ toYamlPretty . | indent 6 }}
"#;

/// The default `meta-data`, rendered with [`crate::cloudinit::values::MetaData`].
pub const META_DATA: &str = r#"instance-id: {{ .InstanceID }}
hostname: {{ .Hostname }}
local-hostname: {{ .Hostname }}
{{- with .InstanceType }}
instance-type: {{ . }}
{{- end }}
{{- with .ProviderID }}
provider-id: {{ . }}
{{- end }}
region: {{ .Region }}
zone: {{ .Zone }}
availability-zone: {{ .Zone }}
"#;

/// `network-config` in cloud-init's version 2 (netplan) format, the default; rendered with
/// [`crate::cloudinit::values::NetworkConfig`].
pub const NETWORK_V2: &str = r#"network:
  version: 2
  renderer: networkd
  ethernets:
{{- range $nic := .Interfaces }}
    {{ $nic.Name }}:
      match:
        macaddress: {{ lower $nic.MacAddr | quote }}
{{- if $nic.MTU }}
      mtu: {{ $nic.MTU }}
{{- end }}
{{- if $nic.DHCPv4 }}
      dhcp4: true
{{- end }}
{{- if $nic.DHCPv6 }}
      dhcp6: true
{{- end }}
{{- if or $nic.Address4 $nic.Address6 }}
      addresses:
{{- range $address := $nic.Address4 }}
      - {{ quote $address }}
{{- end }}
{{- range $address := $nic.Address6 }}
      - {{ quote $address }}
{{- end }}
{{- if or $nic.Gateway4 $nic.Gateway6 }}
      routes:
{{- with $nic.Gateway4 }}
      - to: "0.0.0.0/0"
        via: {{ quote . }}
{{- end }}
{{- with $nic.Gateway6 }}
      - to: "::/0"
        via: {{ quote . }}
{{- end }}
{{- end }}
{{- else if and $nic.SLAAC $nic.NodeAddress6 }}
      addresses:
      - {{ cidrslaac $nic.MacAddr $nic.NodeAddress6 | quote }}
      routes:
      - to: "::/0"
        via: {{ cidrhost $nic.NodeAddress6 | quote }}
{{- end }}
{{- if or $.NameServers $.SearchDomains }}
      nameservers:
{{- with $.NameServers }}
        addresses:
{{- range . }}
        - {{ quote . }}
{{- end }}
{{- end }}
{{- with $.SearchDomains }}
        search:
{{- range . }}
        - {{ quote . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
"#;

/// `network-config` in cloud-init's version 1 format; rendered with
/// [`crate::cloudinit::values::NetworkConfig`]. A static IPv6 address is configured only
/// together with its gateway, as upstream's.
pub const NETWORK_V1: &str = r#"version: 1
config:
{{- range $nic := .Interfaces }}
- type: physical
  name: {{ $nic.Name }}
  mac_address: {{ lower $nic.MacAddr | quote }}
{{- if $nic.MTU }}
  mtu: {{ $nic.MTU }}
{{- end }}
  subnets:
{{- if $nic.DHCPv4 }}
  - type: dhcp
{{- else }}
{{- range $address := $nic.Address4 }}
  - type: static
    address: {{ quote $address }}
{{- with $nic.Gateway4 }}
    gateway: {{ quote . }}
{{- end }}
{{- end }}
{{- end }}
{{- if $nic.DHCPv6 }}
  - type: dhcp6
{{- else if and $nic.Address6 $nic.Gateway6 }}
{{- range $address := $nic.Address6 }}
  - type: static6
    address: {{ quote $address }}
    gateway: {{ quote $nic.Gateway6 }}
{{- end }}
{{- else if and $nic.SLAAC $nic.NodeAddress6 }}
  - type: static6
    address: {{ cidrslaac $nic.MacAddr $nic.NodeAddress6 | quote }}
    gateway: {{ cidrhost $nic.NodeAddress6 | quote }}
{{- else if $nic.SLAAC }}
  - type: ipv6_slaac
{{- end }}
{{- end }}
{{- with .NameServers }}
- type: nameserver
  address:
{{- range . }}
  - {{ quote . }}
{{- end }}
{{- with $.SearchDomains }}
  search:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end }}
"#;
