from django.http import JsonResponse
from django.urls import path
from djust import push_to_view
from djust_site.views import CounterView


def push(request):
    """push_to_view from a sync view: every mounted CounterView gets count=N."""
    push_to_view("djust_site.views.CounterView", state={"count": int(request.GET.get("n", "0"))})
    return JsonResponse({"ok": True})


urlpatterns = [path("", CounterView.as_view()), path("push/", push)]
