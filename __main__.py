"""nemo-rl-gke: load the stack config, build the components, export what users need next."""

import pulumi

from infra import config as stack_config

settings = stack_config.load()
cfg = settings.config
pulumi.export("flavour", cfg.flavour)
