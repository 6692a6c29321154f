"""The demo behind `python -m kcore.cluster`: the model of what it watches and concludes
(`model`), its fault schedule (`schedule`), the clusters it drives (`targets`), the run
(`runner`) and how it shows itself (`display`)."""
