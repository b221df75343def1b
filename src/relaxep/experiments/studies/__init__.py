"""The studies: the paper's toy, synthetic and UCI experiments, and the robustness suite."""
