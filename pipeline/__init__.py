"""Regenerate, publish and evaluate the ImageNetV2 and CIFAR-10.1 test sets.

Importing this package is cheap: heavy dependencies (torch, timm, ray, matplotlib) are imported
only by the stages that need them.
"""
