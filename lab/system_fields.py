"""Names of the fields of `systems/<system_desc_id>.json` that the official checker knows.

Data, from the checker's SYSTEM_DESC_REQUIRED_FIELDS (35), the subset that must be non-empty (26),
and the power fields (15). hosts.yaml may set any of them by hand.
"""

REQUIRED = (
    "division", "submitter", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_storage_capacity", "host_storage_type",
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack",
    "host_processor_frequency", "host_processor_caches", "host_memory_configuration",
    "host_processor_interconnect", "host_networking", "host_networking_topology",
    "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes",
    "host_network_card_count", "system_type_detail",
)

NON_EMPTY = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
    "host_memory_capacity", "host_memory_configuration", "host_storage_capacity",
    "host_storage_type", "host_networking", "host_network_card_count",
    "host_networking_topology", "accelerators_per_node", "accelerator_model_name",
    "accelerator_memory_capacity", "accelerator_host_interconnect",
    "accelerator_memory_configuration", "accelerator_interconnect", "cooling", "framework",
    "operating_system", "other_software_stack",
)

POWER = (
    "power_management", "filesystem", "boot_firmware_version", "management_firmware_version",
    "other_hardware", "number_of_type_nics_installed", "nics_enabled_firmware",
    "nics_enabled_os", "nics_enabled_connected", "network_speed_mbit",
    "power_supply_quantity_and_rating_watts", "power_supply_details", "disk_drives",
    "disk_controllers", "system_power_only",
)

NETWORK = (
    "is_network", "network_type", "network_media", "network_rate", "nic_loadgen",
    "number_nic_loadgen", "net_software_stack_loadgen", "network_protocol", "number_connections",
    "nic_sut", "number_nic_sut", "net_software_stack_sut", "network_topology",
)

OPTIONAL = ("system_power_capacity",)

ALL = REQUIRED + POWER + NETWORK + OPTIONAL
