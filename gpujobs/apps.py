from django.apps import AppConfig


class GpujobsConfig(AppConfig):
    name = "gpujobs"
    verbose_name = "GPU jobs"
