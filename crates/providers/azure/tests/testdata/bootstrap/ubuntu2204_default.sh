#!/bin/bash

set -o allexport
echo '#EOF' >> /opt/azure/manifest.json
mkdir -p /var/log/azure/Microsoft.Azure.Extensions.CustomScript/events

echo $(date),$(hostname) > /var/log/azure/cluster-provision-cse-output.log;
for i in $(seq 1 1200); do
grep -Fq "EOF" /opt/azure/containers/provision.sh && break;
if [ $i -eq 1200 ]; then exit 100; else sleep 1; fi;
done;

ADMINUSER=azureuser
MOBY_VERSION=
TENANT_ID=72f988bf-86f1-41af-91ab-2d7cd011db47
KUBERNETES_VERSION=1.33.2
HYPERKUBE_URL=
KUBE_BINARY_URL=https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-amd64.tar.gz
CUSTOM_KUBE_BINARY_URL=
CREDENTIAL_PROVIDER_DOWNLOAD_URL=https://acs-mirror.azureedge.net/cloud-provider-azure/v1.33.0/binaries/azure-acr-credential-provider-linux-amd64-v1.33.0.tar.gz
KUBEPROXY_URL=
APISERVER_PUBLIC_KEY=
SUBSCRIPTION_ID=12345678-1234-1234-1234-123456789012
RESOURCE_GROUP=MC_test-rg_test-cluster_eastus
LOCATION=eastus
VM_TYPE=standard
SUBNET=aks-subnet
NETWORK_SECURITY_GROUP=aks-agentpool-12345678-nsg
VIRTUAL_NETWORK=aks-vnet-12345678
VIRTUAL_NETWORK_RESOURCE_GROUP=test-resourceGroup
ROUTE_TABLE=aks-agentpool-12345678-routetable
PRIMARY_AVAILABILITY_SET=
PRIMARY_SCALE_SET=
SERVICE_PRINCIPAL_CLIENT_ID=msi
NETWORK_PLUGIN=none
NETWORK_POLICY=""
VNET_CNI_PLUGINS_URL=https://acs-mirror.azureedge.net/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-amd64-v1.4.32.tgz
CNI_PLUGINS_URL=https://acs-mirror.azureedge.net/cni-plugins/v1.1.1/binaries/cni-plugins-linux-amd64-v1.1.1.tgz
CLOUDPROVIDER_BACKOFF=true
CLOUDPROVIDER_BACKOFF_MODE=v2
CLOUDPROVIDER_BACKOFF_RETRIES=6
CLOUDPROVIDER_BACKOFF_EXPONENT=0
CLOUDPROVIDER_BACKOFF_DURATION=5
CLOUDPROVIDER_BACKOFF_JITTER=0
CLOUDPROVIDER_RATELIMIT=true
CLOUDPROVIDER_RATELIMIT_QPS=10
CLOUDPROVIDER_RATELIMIT_QPS_WRITE=10
CLOUDPROVIDER_RATELIMIT_BUCKET=100
CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE=100
LOAD_BALANCER_DISABLE_OUTBOUND_SNAT=false
USE_MANAGED_IDENTITY_EXTENSION=true
USE_INSTANCE_METADATA=true
LOAD_BALANCER_SKU=Standard
EXCLUDE_MASTER_FROM_STANDARD_LB=true
MAXIMUM_LOADBALANCER_RULE_COUNT=250
CONTAINER_RUNTIME=containerd
CLI_TOOL=ctr
CONTAINERD_DOWNLOAD_URL_BASE=
NETWORK_MODE=
KUBE_BINARY_URL=https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-amd64.tar.gz
USER_ASSIGNED_IDENTITY_ID=61f71907-753f-4802-a901-47361c3664f2
API_SERVER_NAME=test-cluster-dns-abc123.hcp.eastus.azmk8s.io
IS_VHD=true
GPU_NODE=false
SGX_NODE=false
MIG_NODE=false
CONFIG_GPU_DRIVER_IF_NEEDED=false
ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED=false
TELEPORTD_PLUGIN_DOWNLOAD_URL=
CONTAINERD_VERSION=
CONTAINERD_PACKAGE_URL=
RUNC_VERSION=
RUNC_PACKAGE_URL=
ENABLE_HOSTS_CONFIG_AGENT="false"
DISABLE_SSH="false"
NEEDS_CONTAINERD="true"
TELEPORT_ENABLED="false"
SHOULD_CONFIGURE_HTTP_PROXY="false"
SHOULD_CONFIGURE_HTTP_PROXY_CA="false"
HTTP_PROXY_TRUSTED_CA=""
SHOULD_CONFIGURE_CUSTOM_CA_TRUST="false"
CUSTOM_CA_TRUST_COUNT="0"

IS_KRUSTLET="false"
GPU_NEEDS_FABRIC_MANAGER="false"
NEEDS_DOCKER_LOGIN="false"
IPV6_DUAL_STACK_ENABLED="false"
OUTBOUND_COMMAND="curl -v --insecure --proxy-insecure https://mcr.microsoft.com/v2/"
ENABLE_UNATTENDED_UPGRADES="false"
ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE="false"
SHOULD_CONFIG_SWAP_FILE="false"
SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE="false"
TARGET_CLOUD="AzurePublicCloud"
TARGET_ENVIRONMENT="AzurePublicCloud"
CUSTOM_ENV_JSON=""
IS_CUSTOM_CLOUD="false"
CSE_HELPERS_FILEPATH="/opt/azure/containers/provision_source.sh"
CSE_DISTRO_HELPERS_FILEPATH="/opt/azure/containers/provision_source_distro.sh"
CSE_INSTALL_FILEPATH="/opt/azure/containers/provision_installs.sh"
CSE_DISTRO_INSTALL_FILEPATH="/opt/azure/containers/provision_installs_distro.sh"
CSE_CONFIG_FILEPATH="/opt/azure/containers/provision_configs.sh"
AZURE_PRIVATE_REGISTRY_SERVER=""
HAS_CUSTOM_SEARCH_DOMAIN="false"
CUSTOM_SEARCH_DOMAIN_FILEPATH="/opt/azure/containers/setup-custom-search-domains.sh"
HTTP_PROXY_URLS=""
HTTPS_PROXY_URLS=""
NO_PROXY_URLS=""
ENABLE_TLS_BOOTSTRAPPING="true"
ENABLE_SECURE_TLS_BOOTSTRAPPING="false"
ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION="false"
DHCPV6_SERVICE_FILEPATH=""
DHCPV6_CONFIG_FILEPATH=""
THP_ENABLED=""
THP_DEFRAG=""
SERVICE_PRINCIPAL_FILE_CONTENT="bXNp"
KUBELET_CLIENT_CONTENT=""
KUBELET_CLIENT_CERT_CONTENT=""
KUBELET_CONFIG_FILE_ENABLED="false"
KUBELET_CONFIG_FILE_CONTENT=""
SWAP_FILE_SIZE_MB="0"
GPU_IMAGE_SHA=""
GPU_DRIVER_VERSION=""
GPU_DRIVER_TYPE=""
GPU_INSTANCE_PROFILE=""
CUSTOM_SEARCH_DOMAIN_NAME=""
CUSTOM_SEARCH_REALM_USER=""
CUSTOM_SEARCH_REALM_PASSWORD=""
MESSAGE_OF_THE_DAY=""
HAS_KUBELET_DISK_TYPE="false"
NEEDS_CGROUPV2="true"
SYSCTL_CONTENT="bmV0LmlwdjQudGNwX3JldHJpZXMyPTgKbmV0LmNvcmUubWVzc2FnZV9idXJzdD04MApuZXQuY29yZS5tZXNzYWdlX2Nvc3Q9NDAKbmV0LmNvcmUuc29tYXhjb25uPTE2Mzg0Cm5ldC5pcHY0LnRjcF9tYXhfc3luX2JhY2tsb2c9MTYzODQKbmV0LmlwdjQubmVpZ2guZGVmYXVsdC5nY190aHJlc2gxPTQwOTYKbmV0LmlwdjQubmVpZ2guZGVmYXVsdC5nY190aHJlc2gyPTgxOTIKbmV0LmlwdjQubmVpZ2guZGVmYXVsdC5nY190aHJlc2gzPTE2Mzg0Cg=="
TLS_BOOTSTRAP_TOKEN="abcdef.0123456789abcdef"
KUBELET_FLAGS="--address=0.0.0.0 --anonymous-auth=false --authentication-token-webhook=true --authorization-mode=Webhook --cgroups-per-qos=true --client-ca-file=/etc/kubernetes/certs/ca.crt --cloud-config=/etc/kubernetes/azure.json --cloud-provider=external --cluster-dns=10.0.0.10 --cluster-domain=cluster.local --enforce-node-allocatable=pods --event-qps=0 --eviction-hard=memory.available<750Mi --image-credential-provider-bin-dir=/var/lib/kubelet/credential-provider --image-credential-provider-config=/var/lib/kubelet/credential-provider-config.yaml --image-gc-high-threshold=85 --image-gc-low-threshold=80 --kube-reserved=cpu=100m,memory=1843Mi --kubeconfig=/var/lib/kubelet/kubeconfig --max-pods=250 --node-status-update-frequency=10s --pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6 --pod-manifest-path=/etc/kubernetes/manifests --pod-max-pids=-1 --protect-kernel-defaults=true --read-only-port=0 --register-with-taints=karpenter.sh/unregistered:NoExecute --resolv-conf=/run/systemd/resolve/resolv.conf --rotate-certificates=true --streaming-connection-idle-timeout=4h --system-reserved=cpu=0,memory=0 --tls-cert-file=/etc/kubernetes/certs/kubeletserver.crt --tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256 --tls-private-key-file=/etc/kubernetes/certs/kubeletserver.key"
KUBELET_NODE_LABELS="karpenter.azure.com/placement-scope=zonal,karpenter.azure.com/sku-name=Standard_D2s_v3,karpenter.azure.com/sku-storage-ultra-ssd=false,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,kubernetes.azure.com/azure-cni-overlay=true,kubernetes.azure.com/cluster=MC_test-rg_test-cluster_eastus,kubernetes.azure.com/ebpf-dataplane=cilium,kubernetes.azure.com/kubelet-identity-client-id=61f71907-753f-4802-a901-47361c3664f2,kubernetes.azure.com/localdns-state=disabled,kubernetes.azure.com/mode=user,kubernetes.azure.com/network-stateless-cni=false,kubernetes.azure.com/network-subnet=aks-subnet,kubernetes.azure.com/nodenetwork-vnetguid=a519e60a-cac0-40b2-b883-084477fe6f5c,kubernetes.azure.com/os-sku=Ubuntu,kubernetes.azure.com/os-sku-effective=Ubuntu2204,kubernetes.azure.com/os-sku-requested=Ubuntu2204,kubernetes.azure.com/podnetwork-type=overlay,kubernetes.azure.com/priority=regular,kubernetes.azure.com/role=agent,kubernetes.azure.com/scalesetpriority=regular,kubernetes.io/arch=amd64,kubernetes.io/os=linux,node.kubernetes.io/instance-type=Standard_D2s_v3,topology.kubernetes.io/region=eastus"
AZURE_ENVIRONMENT_FILEPATH=""
KUBE_CA_CRT="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNZVENDQWNxZ0F3SUJBZ0lRCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
CONTAINERD_CONFIG_CONTENT="dmVyc2lvbiA9IDIKb29tX3Njb3JlID0gMApbcGx1Z2lucy4iaW8uY29udGFpbmVyZC5ncnBjLnYxLmNyaSJdCiAgc2FuZGJveF9pbWFnZSA9ICJtY3IubWljcm9zb2Z0LmNvbS9vc3Mva3ViZXJuZXRlcy9wYXVzZTozLjYiCiAgW3BsdWdpbnMuImlvLmNvbnRhaW5lcmQuZ3JwYy52MS5jcmkiLmNvbnRhaW5lcmRdCiAgICBkZWZhdWx0X3J1bnRpbWVfbmFtZSA9ICJydW5jIgogICAgW3BsdWdpbnMuImlvLmNvbnRhaW5lcmQuZ3JwYy52MS5jcmkiLmNvbnRhaW5lcmQucnVudGltZXMucnVuY10KICAgICAgcnVudGltZV90eXBlID0gImlvLmNvbnRhaW5lcmQucnVuYy52MiIKICAgIFtwbHVnaW5zLiJpby5jb250YWluZXJkLmdycGMudjEuY3JpIi5jb250YWluZXJkLnJ1bnRpbWVzLnJ1bmMub3B0aW9uc10KICAgICAgQmluYXJ5TmFtZSA9ICIvdXNyL2Jpbi9ydW5jIgogICAgICBTeXN0ZW1kQ2dyb3VwID0gdHJ1ZQogICAgW3BsdWdpbnMuImlvLmNvbnRhaW5lcmQuZ3JwYy52MS5jcmkiLmNvbnRhaW5lcmQucnVudGltZXMudW50cnVzdGVkXQogICAgICBydW50aW1lX3R5cGUgPSAiaW8uY29udGFpbmVyZC5ydW5jLnYyIgogICAgW3BsdWdpbnMuImlvLmNvbnRhaW5lcmQuZ3JwYy52MS5jcmkiLmNvbnRhaW5lcmQucnVudGltZXMudW50cnVzdGVkLm9wdGlvbnNdCiAgICAgIEJpbmFyeU5hbWUgPSAiL3Vzci9iaW4vcnVuYyIKICBbcGx1Z2lucy4iaW8uY29udGFpbmVyZC5ncnBjLnYxLmNyaSIucmVnaXN0cnldCiAgICBjb25maWdfcGF0aCA9ICIvZXRjL2NvbnRhaW5lcmQvY2VydHMuZCIKICBbcGx1Z2lucy4iaW8uY29udGFpbmVyZC5ncnBjLnYxLmNyaSIucmVnaXN0cnkuaGVhZGVyc10KICAgIFgtTWV0YS1Tb3VyY2UtQ2xpZW50ID0gWyJhenVyZS9ha3MiXQpbbWV0cmljc10KICBhZGRyZXNzID0gIjAuMC4wLjA6MTAyNTciCg=="
IS_KATA="false"
MCR_REPOSITORY_BASE="mcr.microsoft.com"
ENABLE_IMDS_RESTRICTION=false
INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE=false
CSE_TIMEOUT=15m
/usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh"
